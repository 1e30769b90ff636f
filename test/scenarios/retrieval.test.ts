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
import { componentLogger } from "../../shared/kernel/logger.ts";
import { addDocument, type KnowledgeDeps } from "../../shared/knowledge/documents.ts";
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
  for (const q of QUESTIONS) {
    const found = await searchKnowledge(deps, {
      tenant: "acme",
      text: q.question,
      kinds: ["doc.Chunk"],
      limit: 5,
    });
    const at = found.findIndex((f) => f.document?.name === q.document && f.text.includes(q.answer));
    if (at < 0) missed.push(q.question);
    if (at === 0) first++;
  }
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
    console.log(
      `offline embedder: recall@5 ${recall.toFixed(3)}, recall@1 ${atOne.toFixed(3)} (${QUESTIONS.length} questions, ${chunks} chunks); missed at 5: ${JSON.stringify(missed)}`,
    );
    expect(recall).toBeGreaterThanOrEqual(0.8);
  });

  it("recall@5 with an OpenAI-compatible embedder (the lexical fake)", async () => {
    const embedder = new OpenAIEmbedder({ baseUrl, model: "lexical-fake", dimension: 256 });
    const { recall, atOne, chunks, missed } = await recallAt5(embedder);
    console.log(
      `OpenAI-compatible fake: recall@5 ${recall.toFixed(3)}, recall@1 ${atOne.toFixed(3)} (${QUESTIONS.length} questions, ${chunks} chunks); missed at 5: ${JSON.stringify(missed)}`,
    );
    expect(recall).toBeGreaterThanOrEqual(0.6);
  });
});
