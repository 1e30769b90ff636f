import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Chunk } from "../../shared/domain/resources.ts";
import { ConflictError } from "../../shared/kernel/errors.ts";
import {
  addDocument,
  type DocumentState,
  documentKey,
  getDocument,
  type KnowledgeDeps,
  MAX_ATTEMPTS,
  PROCESSING_STALE_MS,
} from "../../shared/knowledge/documents.ts";
import { processDocument } from "../../shared/knowledge/process-document.ts";
import type { Embedder } from "../../shared/ports/embeddings.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, pass } from "./scenarios.ts";

/**
 * Documents when things go wrong: the command lost, the process dying mid-way (again and again),
 * two runs of one document at once, two adds of one name at once, a command delivered twice. What
 * was accepted is processed once and ends ready (or failed, saying why); no chunk is written twice
 * over another version's.
 */
let h: Harness;
const TENANT = "acme";
const text = (n: number) =>
  Array.from({ length: n }, (_, i) => `## Part ${i}\n\nPart ${i} says that the number is ${i * 7}.`).join(
    "\n\n",
  );

beforeAll(async () => {
  h = await Harness.create({ script: () => pass(), assistants: GENERALIST });
});
afterAll(() => h.close());

/** The engine's deps with another bus or embedder: what a dying or silent process looks like. */
const depsWith = (over: Partial<KnowledgeDeps>): KnowledgeDeps => ({ ...h.engine.deps, ...over });
const silentBus = { publish: async () => {}, subscribe: () => () => {} } as unknown as KnowledgeDeps["bus"];
/** Counts the texts embedded; `dieAfter` calls, the next throws (the process "dies" there). */
function countingEmbedder(dieAfter = Number.POSITIVE_INFINITY): Embedder & { texts: number } {
  const real = h.engine.deps.embedder;
  let calls = 0;
  const e = {
    id: real.id,
    dimension: real.dimension,
    texts: 0,
    embed: async (texts: readonly string[]) => {
      if (calls++ >= dieAfter) throw new Error("simulated crash: the process is gone");
      e.texts += texts.length;
      return real.embed(texts);
    },
  };
  return e;
}
const later = (ms: number) => {
  h.now += ms;
};
/** As a run whose process died leaves a document: processing, its attempt counted. */
async function diedWhileProcessing(urn: string): Promise<void> {
  const record = await h.rt.state.get<DocumentState>(documentKey(urn));
  await h.rt.state.transact([
    {
      op: "put",
      record: {
        key: documentKey(urn),
        kind: "document",
        parent: "cld:common.Tenant.acme",
        status: "processing",
        updatedAt: new Date(h.now).toISOString(),
        data: { ...(record?.data as DocumentState), attempts: (record?.data.attempts ?? 0) + 1 },
      },
      expectedVersion: record?.version as number,
    },
  ]);
}
const chunks = async (urn: string) => (await h.rt.resources.children(urn, "doc.Chunk")) as Chunk[];

describe("a document's processing", () => {
  it("whose command was lost is sent again by the watchdog, and ends ready", async () => {
    const { urn } = await addDocument(depsWith({ bus: silentBus }), {
      tenant: TENANT,
      actor: "user_ada",
      name: "lost.md",
      bytes: Buffer.from(text(3)),
    });
    await h.idle();
    expect((await getDocument(h.engine.deps, TENANT, urn)).status).toBe("pending");
    later(11 * 60_000);
    await h.engine.watchdog(10 * 60_000);
    await h.idle();
    expect(await getDocument(h.engine.deps, TENANT, urn)).toMatchObject({ status: "ready", chunks: 3 });
  });

  it("failing mid-way (the embedder down) is handed back as pending, uncounted: the retry takes it at once, each chunk once", async () => {
    const { urn } = await addDocument(depsWith({ bus: silentBus }), {
      tenant: TENANT,
      actor: "user_ada",
      name: "crash.md",
      bytes: Buffer.from(text(80)), // three batches of chunks
    });
    await expect(processDocument(depsWith({ embedder: countingEmbedder(1) }), urn)).rejects.toThrow(
      /simulated crash/,
    );
    const record = await h.rt.state.get<DocumentState>(documentKey(urn));
    expect(record).toMatchObject({ status: "pending", data: { attempts: 0, embedded: 32 } });
    await processDocument(h.engine.deps, urn); // the delivery's retry
    const done = await getDocument(h.engine.deps, TENANT, urn);
    expect(done).toMatchObject({ status: "ready", chunks: 80, attempts: 1 });
    const ids = (await chunks(urn)).map((c) => c.meta.id);
    expect(ids).toHaveLength(80);
    expect(new Set(ids).size).toBe(80);
  });

  it("cut short by a process that died is left processing: a delivery while it is fresh waits, the watchdog takes it once stale", async () => {
    const { urn } = await addDocument(depsWith({ bus: silentBus }), {
      tenant: TENANT,
      actor: "user_ada",
      name: "died.md",
      bytes: Buffer.from(text(4)),
    });
    await diedWhileProcessing(urn);
    await processDocument(h.engine.deps, urn);
    expect((await getDocument(h.engine.deps, TENANT, urn)).status).toBe("processing");
    later(PROCESSING_STALE_MS + 1);
    await h.engine.watchdog(PROCESSING_STALE_MS);
    await h.idle();
    expect(await getDocument(h.engine.deps, TENANT, urn)).toMatchObject({
      status: "ready",
      chunks: 4,
      attempts: 2,
    });
  });

  it(`cut short ${MAX_ATTEMPTS} times (its process dying each time) is failed, saying why; an outage never fails it`, async () => {
    const { urn } = await addDocument(depsWith({ bus: silentBus }), {
      tenant: TENANT,
      actor: "user_ada",
      name: "doomed.md",
      bytes: Buffer.from(text(2)),
    });
    // An embedder down, again and again: handed back each time, never failed for it.
    for (let i = 0; i < MAX_ATTEMPTS + 2; i++)
      await expect(processDocument(depsWith({ embedder: countingEmbedder(0) }), urn)).rejects.toThrow();
    expect(await getDocument(h.engine.deps, TENANT, urn)).toMatchObject({ status: "pending", attempts: 0 });
    // Runs that died: each leaves it processing, its attempt counted.
    for (let i = 0; i < MAX_ATTEMPTS; i++) {
      await diedWhileProcessing(urn);
      later(PROCESSING_STALE_MS + 1);
    }
    await processDocument(h.engine.deps, urn);
    const failed = await getDocument(h.engine.deps, TENANT, urn);
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatch(/processing stopped 3 times .* split it into parts/);
    expect(await chunks(urn)).toEqual([]);
  });

  it("run twice at once (a command delivered twice) is done once", async () => {
    const { urn } = await addDocument(depsWith({ bus: silentBus }), {
      tenant: TENANT,
      actor: "user_ada",
      name: "twice.md",
      bytes: Buffer.from(text(5)),
    });
    const embedder = countingEmbedder();
    await Promise.all([
      processDocument(depsWith({ embedder }), urn),
      processDocument(depsWith({ embedder }), urn),
    ]);
    expect(embedder.texts).toBe(5);
    expect((await getDocument(h.engine.deps, TENANT, urn)).status).toBe("ready");
  });
});

describe("two adds of one name at once", () => {
  it("one wins, the other is told to try again; the winner's text is what is read", async () => {
    const add = (body: string) =>
      addDocument(h.engine.deps, {
        tenant: TENANT,
        actor: "user_ada",
        name: "race.md",
        bytes: Buffer.from(body),
      });
    const outcomes = await Promise.allSettled([
      add("# First\n\nthe first version"),
      add("# Second\n\nthe second version"),
    ]);
    const won = outcomes.filter((o) => o.status === "fulfilled");
    expect(won.length).toBeGreaterThanOrEqual(1);
    for (const o of outcomes) if (o.status === "rejected") expect(o.reason).toBeInstanceOf(ConflictError);
    await h.idle();
    const urn = (won[0] as PromiseFulfilledResult<{ urn: string }>).value.urn;
    const state = await getDocument(h.engine.deps, TENANT, urn);
    expect(state.status).toBe("ready");
    const content = (await chunks(urn)).map((c) => c.content).join(" ");
    expect(content).toBe(state.title === "First" ? "the first version" : "the second version");
    // Only the winner's bytes are kept.
    expect((await h.rt.objects.list(`${urn}.source.`)).keys).toHaveLength(1);
  });
});
