import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalEmbedder } from "../../shared/adapters/embeddings/local-embedder.ts";
import { OpenAIEmbedder } from "../../shared/adapters/embeddings/openai-embedder.ts";
import { openLocalVectorIndex } from "../../shared/adapters/vectors/open-local-index.ts";
import type { Chunk } from "../../shared/domain/resources.ts";
import { componentLogger } from "../../shared/kernel/logger.ts";
import { addDocument, documentUrn, type KnowledgeDeps } from "../../shared/knowledge/documents.ts";
import { processDocument } from "../../shared/knowledge/process-document.ts";
import { searchKnowledge } from "../../shared/knowledge/search.ts";
import type { Embedder } from "../../shared/ports/embeddings.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local/local.ts";

/**
 * The retrieval test set (test/fixtures/retrieval/): four documents and 38 questions, each with
 * the words of the passage that answers it. A question is answered at 5 when one of the five
 * chunks searched for it holds those words. Scored for the offline embedder and for an
 * OpenAI-compatible server (a fake one here, over HTTP, through the real client), printed, and
 * held above a floor so a change to chunking or search that loses answers fails.
 */
const FIXTURES = new URL("../fixtures/retrieval/", import.meta.url);
const DOCUMENTS = ["support-handbook.md", "tent-manual.md", "travel-policy.md", "security-policy.md"];
interface Question {
  question: string;
  document: string;
  answer: string;
}
const QUESTIONS = JSON.parse(readFileSync(new URL("questions.json", FIXTURES), "utf8")) as Question[];

/**
 * An OpenAI-compatible embeddings server: a text's vector is its stemmed words hashed into 256
 * signed buckets (a lexical embedder: what a small general model at least gets right).
 */
function lexicalVector(text: string, dimension: number): number[] {
  const v = new Array<number>(dimension).fill(0);
  for (const raw of text.toLowerCase().match(/[a-z0-9]+/g) ?? []) {
    if (raw.length < 3) continue;
    const word = raw.replace(/(ing|ed|es|s)$/, "");
    let h = 2166136261;
    for (const ch of word) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
    v[Math.abs(h) % dimension] = (v[Math.abs(h) % dimension] ?? 0) + (h & 1 ? 1 : -1);
  }
  return v;
}

/** A measurement, printed on the test run's output (as the AWS path's bench prints its table). */
const report = (line: string) => process.stdout.write(`${line}\n`);

/** The hybrid measurement of each embedder, printed by the last test. */
const hybrid: string[] = [];
/** recall@5 of Arbor's own search (re-ranked by words), per embedder. */
const searchedRecall: number[] = [];

/** Which fixture a chunk came from: its document's name (the fixture's file name). */
const documentNameOf = (c: Chunk) => DOCUMENTS.find((name) => c.meta.parent === documentUrn("acme", name));

/** BM25 (k1 1.2, b 0.75) over `texts`: a query's ranking of them, best first, by index. */
function bm25(texts: readonly string[]): (query: string) => number[] {
  const words = (t: string) => (t.toLowerCase().match(/[a-z0-9]+/g) ?? []).map((w) => w.replace(/s$/, ""));
  const docs = texts.map(words);
  const avg = docs.reduce((n, d) => n + d.length, 0) / docs.length;
  const df = new Map<string, number>();
  for (const d of docs) for (const w of new Set(d)) df.set(w, (df.get(w) ?? 0) + 1);
  return (query) => {
    const terms = new Set(words(query));
    const scores = docs.map((d) => {
      let score = 0;
      for (const term of terms) {
        const tf = d.filter((w) => w === term).length;
        if (!tf) continue;
        const n = df.get(term) ?? 0;
        const idf = Math.log(1 + (docs.length - n + 0.5) / (n + 0.5));
        score += (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * d.length) / avg));
      }
      return score;
    });
    return scores.map((_, i) => i).sort((a, b) => (scores[b] as number) - (scores[a] as number));
  };
}

let server: Server;
let baseUrl: string;
const folders: string[] = [];
const runtimes: LocalRuntime[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += String(c);
    });
    req.on("end", () => {
      const { input } = JSON.parse(body) as { input: string[] };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ data: input.map((t, index) => ({ index, embedding: lexicalVector(t, 256) })) }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.close();
  for (const rt of runtimes) await rt.close();
  for (const f of folders) await rm(f, { recursive: true, force: true });
});

async function recallAt5(
  embedder: Embedder,
): Promise<{ recall: number; atOne: number; chunks: number; missed: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), "arbor-retrieval-"));
  folders.push(dir);
  const rt = createLocalRuntime({ mode: "local", tenant: "acme", dataDir: dir, durable: false });
  runtimes.push(rt);
  const index = await openLocalVectorIndex(dir, "vectors", {
    embedderId: embedder.id,
    dimension: embedder.dimension,
  });
  const deps: KnowledgeDeps = {
    ...rt,
    embedder,
    index,
    clock: () => new Date(),
    log: componentLogger("retrieval"),
  };
  for (const name of DOCUMENTS) {
    const { urn } = await addDocument(deps, {
      tenant: "acme",
      actor: "user_ada",
      name,
      bytes: readFileSync(new URL(name, FIXTURES)),
    });
    await processDocument(deps, urn);
  }
  const missed: string[] = [];
  let first = 0;
  // Hybrid, measured beside it: the vector ranking fused with a keyword ranking (BM25 over every
  // chunk) by reciprocal rank, to see whether a keyword index would pay for itself.
  const chunkUrns = await rt.resources.descendantUrns("cld:common.Tenant.acme", "doc.Chunk");
  const all = (await rt.resources.getMany(chunkUrns)) as Chunk[];
  const keyword = bm25(all.map((c) => c.content));
  let hybridHits = 0;
  let hybridFirst = 0;
  let rerankedHits = 0;
  let rerankedFirst = 0;
  const answers = (name: string | undefined, text: string, q: Question) =>
    name === q.document && text.includes(q.answer);
  for (const q of QUESTIONS) {
    const found = await searchKnowledge(deps, {
      tenant: "acme",
      text: q.question,
      kinds: ["doc.Chunk"],
      limit: 20,
      hybrid: false,
    });
    const at = found.slice(0, 5).findIndex((f) => answers(f.document?.name, f.text, q));
    if (at < 0) missed.push(q.question);
    if (at === 0) first++;
    // As Arbor searches: the nearest re-ranked by the question's words too.
    const searched = await searchKnowledge(deps, {
      tenant: "acme",
      text: q.question,
      kinds: ["doc.Chunk"],
      limit: 5,
    });
    const rank = searched.findIndex((f) => answers(f.document?.name, f.text, q));
    if (rank >= 0) rerankedHits++;
    if (rank === 0) rerankedFirst++;
    const fused = new Map<string, number>();
    for (const [rank, f] of found.entries()) fused.set(f.urn, 1 / (60 + rank));
    keyword(q.question)
      .slice(0, 20)
      .forEach((i, rank) => {
        const urn = (all[i] as Chunk).meta.id;
        fused.set(urn, (fused.get(urn) ?? 0) + 1 / (60 + rank));
      });
    const top = [...fused.entries()].sort((x, y) => y[1] - x[1]).slice(0, 5);
    const hit = top.findIndex(([urn]) => {
      const c = all.find((x) => x.meta.id === urn) as Chunk;
      return answers(documentNameOf(c), c.content, q);
    });
    if (hit >= 0) hybridHits++;
    if (hit === 0) hybridFirst++;
  }
  const rate = (n: number) => (n / QUESTIONS.length).toFixed(3);
  hybrid.push(
    `re-ranked by words (Arbor's search) recall@5 ${rate(rerankedHits)}, recall@1 ${rate(rerankedFirst)}; ` +
      `fused with BM25 over every chunk recall@5 ${rate(hybridHits)}, recall@1 ${rate(hybridFirst)}`,
  );
  searchedRecall.push(rerankedHits / QUESTIONS.length);
  const chunks = (await rt.resources.descendantUrns("cld:common.Tenant.acme", "doc.Chunk")).length;
  await index.close?.();
  return {
    recall: (QUESTIONS.length - missed.length) / QUESTIONS.length,
    atOne: first / QUESTIONS.length,
    chunks,
    missed,
  };
}

describe("the retrieval test set", () => {
  it("has 30 questions or more, each answered by words of its document", () => {
    expect(QUESTIONS.length).toBeGreaterThanOrEqual(30);
    for (const q of QUESTIONS)
      expect(readFileSync(new URL(q.document, FIXTURES), "utf8")).toContain(q.answer);
  });

  it("recall@5 with the offline embedder", async () => {
    const { recall, atOne, chunks, missed } = await recallAt5(new LocalEmbedder());
    report(
      `offline embedder: recall@5 ${recall.toFixed(3)}, recall@1 ${atOne.toFixed(3)} (${QUESTIONS.length} questions, ${chunks} chunks); missed at 5: ${JSON.stringify(missed)}`,
    );
    expect(recall).toBeGreaterThanOrEqual(0.8);
  });

  it("recall@5 with an OpenAI-compatible embedder (the lexical fake)", async () => {
    const embedder = new OpenAIEmbedder({ baseUrl, model: "lexical-fake", dimension: 256 });
    const { recall, atOne, chunks, missed } = await recallAt5(embedder);
    report(
      `OpenAI-compatible fake: recall@5 ${recall.toFixed(3)}, recall@1 ${atOne.toFixed(3)} (${QUESTIONS.length} questions, ${chunks} chunks); missed at 5: ${JSON.stringify(missed)}`,
    );
    expect(recall).toBeGreaterThanOrEqual(0.6);
  });

  it("hybrid (the vector ranking fused with BM25 by reciprocal rank), measured for both", () => {
    report(`hybrid: offline embedder: ${hybrid[0]}\nhybrid: OpenAI-compatible fake: ${hybrid[1]}`);
    expect(hybrid).toHaveLength(2);
    // What Arbor searches with: held above the vector alone's floors.
    expect(searchedRecall[0]).toBeGreaterThanOrEqual(0.9);
    expect(searchedRecall[1]).toBeGreaterThanOrEqual(0.85);
  });
});
