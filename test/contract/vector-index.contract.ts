import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { ConfigError, ValidationError } from "../../shared/kernel/errors.ts";
import type { EmbeddingSpace, VectorIndex, VectorRecord } from "../../shared/ports/vector-index.ts";

/**
 * The one contract every VectorIndex adapter passes. `setup` returns a fresh, empty index for the
 * given space, a way to open the same storage again (a restart: a new adapter instance over the
 * same files or the same remote index), and a way to open it for another space (must be refused).
 */
export interface VectorIndexFixture {
  index: VectorIndex;
  reopen(space: EmbeddingSpace): Promise<VectorIndex>;
  cleanup(): Promise<void>;
}

export interface VectorIndexContractOptions {
  /** The largest batch the adapter's backend accepts in one call; the suite writes more than that. */
  backendBatchSize?: number;
}

export const CONTRACT_SPACE: EmbeddingSpace = { embedderId: "test:contract-v1@8", dimension: 8 };
const DIM = CONTRACT_SPACE.dimension;

/** A unit vector at `angle` radians in the plane of the first two axes, plus a little of axis k. */
function vec(angle: number, k = 2, extra = 0): Float32Array {
  const v = new Float32Array(DIM);
  v[0] = Math.cos(angle);
  v[1] = Math.sin(angle);
  v[k] = extra;
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}
const cosine = (a: Float32Array, b: Float32Array) => {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += (a[i] as number) * (b[i] as number);
    na += (a[i] as number) ** 2;
    nb += (b[i] as number) ** 2;
  }
  return dot / Math.sqrt(na * nb);
};

const A = tenantUrn("alpha");
const B = tenantUrn("beta");
const conv = (tenant: string, id: string) => `${tenant}/common.Conversation.${id}`;
const task = (parent: string, id: string) => `${parent}/plan.Task.${id}`;

const rec = (key: string, vector: Float32Array, type = "plan.Task", metadata?: VectorRecord["metadata"]) =>
  metadata === undefined ? { key, vector, type } : { key, vector, type, metadata };

export function vectorIndexContract(
  name: string,
  setup: (space: EmbeddingSpace) => Promise<VectorIndexFixture>,
  options: VectorIndexContractOptions = {},
): void {
  describe(`VectorIndex contract: ${name}`, () => {
    let fx: VectorIndexFixture;
    let index: VectorIndex;
    beforeEach(async () => {
      fx = await setup(CONTRACT_SPACE);
      index = fx.index;
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it("reports its embedding space", () => {
      expect(index.space).toEqual(CONTRACT_SPACE);
    });

    it("returns the top K by cosine similarity, best first, with exact scores", async () => {
      const c = conv(A, "c1");
      const angles = [0.1, 0.9, 0.3, 1.4, 0.6, 2.5];
      await index.upsert(angles.map((a, i) => rec(task(c, `t${i}`), vec(a))));
      const q = vec(0);
      const got = await index.query({ vector: q, topK: 3 });
      expect(got.map((m) => m.key)).toEqual([task(c, "t0"), task(c, "t2"), task(c, "t4")]);
      for (const m of got) {
        const i = Number(m.key.slice(-1));
        expect(m.score).toBeCloseTo(cosine(q, vec(angles[i] as number)), 5);
        expect(m.type).toBe("plan.Task");
      }
      expect((await index.query({ vector: q, topK: 100 })).length).toBe(angles.length);
    });

    it("does not require unit vectors: scores are cosines", async () => {
      const v = vec(0.4).map((x) => x * 7);
      await index.upsert([rec(task(conv(A, "c1"), "big"), v)]);
      const [m] = await index.query({ vector: vec(0.4).map((x) => x * 0.5), topK: 1 });
      expect(m?.score).toBeCloseTo(1, 5);
    });

    it("filters by type", async () => {
      const c = conv(A, "c1");
      await index.upsert([
        rec(task(c, "t1"), vec(0.05)),
        rec(`${A}/common.Assistant.writer`, vec(0.01), "common.Assistant"),
        rec(`${A}/common.Assistant.analyst`, vec(0.5), "common.Assistant"),
      ]);
      const got = await index.query({ vector: vec(0), topK: 10, type: "common.Assistant" });
      expect(got.map((m) => m.key)).toEqual([
        `${A}/common.Assistant.writer`,
        `${A}/common.Assistant.analyst`,
      ]);
      expect(got.every((m) => m.type === "common.Assistant")).toBe(true);
      expect(await index.query({ vector: vec(0), topK: 10, type: "uip.Interaction" })).toEqual([]);
    });

    it("never says it holds no record of a type it holds (mayHold, where the adapter tells)", async () => {
      if (!index.mayHold) return; // an adapter that cannot tell cheaply leaves it out: every query asks
      const c = conv(A, "c1");
      await index.upsert([
        rec(task(c, "t1"), vec(0.05)),
        rec(`${A}/common.Assistant.w`, vec(0.2), "common.Assistant"),
      ]);
      expect(index.mayHold("plan.Task")).toBe(true);
      expect(index.mayHold("common.Assistant")).toBe(true);
      expect(index.mayHold("mem.Memory")).toBe(false);
      await index.delete([`${A}/common.Assistant.w`]);
      expect(index.mayHold("common.Assistant")).toBe(false);
      const reopened = await fx.reopen(CONTRACT_SPACE);
      expect(reopened.mayHold?.("plan.Task")).not.toBe(false);
      await reopened.close?.();
    });

    it("isolates tenants by key prefix: tenant A's prefix never returns tenant B's keys", async () => {
      const ca = conv(A, "c1");
      const cb = conv(B, "c1");
      await index.upsert([
        rec(task(ca, "far"), vec(1.2)),
        rec(task(cb, "exact"), vec(0)),
        rec(task(cb, "near"), vec(0.01)),
        rec(`${tenantUrn("alphabet")}/common.Conversation.c1`, vec(0.02), "common.Conversation"),
      ]);
      const got = await index.query({ vector: vec(0), topK: 10, keyPrefix: `${A}/` });
      expect(got.map((m) => m.key)).toEqual([task(ca, "far")]);
      const forB = await index.query({ vector: vec(0), topK: 10, keyPrefix: `${B}/` });
      expect(forB.map((m) => m.key)).toEqual([task(cb, "exact"), task(cb, "near")]);
    });

    it("fills topK from the prefix even when another tenant holds every closer vector", async () => {
      const ca = conv(A, "c1");
      const cb = conv(B, "c1");
      await index.upsert([
        ...Array.from({ length: 30 }, (_, i) => rec(task(cb, `b${i}`), vec(0.001 * i))),
        ...Array.from({ length: 4 }, (_, i) => rec(task(ca, `a${i}`), vec(1 + 0.1 * i))),
      ]);
      const got = await index.query({ vector: vec(0), topK: 3, keyPrefix: `${A}/` });
      expect(got.map((m) => m.key)).toEqual([0, 1, 2].map((i) => task(ca, `a${i}`)));
    });

    it("filters by a deeper prefix, combined with type", async () => {
      const c1 = conv(A, "c1");
      const c2 = conv(A, "c2");
      const parent = task(c1, "root");
      await index.upsert([
        rec(parent, vec(0)),
        rec(task(parent, "child"), vec(0.2)),
        rec(`${task(parent, "child")}/common.Message.m1`, vec(0.1), "common.Message"),
        rec(task(c2, "other"), vec(0.05)),
      ]);
      const under = await index.query({ vector: vec(0), topK: 10, keyPrefix: `${parent}/` });
      expect(under.map((m) => m.key)).toEqual([
        `${task(parent, "child")}/common.Message.m1`,
        task(parent, "child"),
      ]);
      const tasksInC1 = await index.query({
        vector: vec(0),
        topK: 10,
        keyPrefix: `${c1}/`,
        type: "plan.Task",
      });
      expect(tasksInC1.map((m) => m.key)).toEqual([parent, task(parent, "child")]);
    });

    it("upsert replaces by key: vector, type and metadata", async () => {
      const k = task(conv(A, "c1"), "t1");
      await index.upsert([rec(k, vec(0), "plan.Task", { round: 0, title: "first" })]);
      await index.upsert([rec(k, vec(Math.PI / 2), "common.Message", { round: 1, done: true })]);
      const got = await index.query({ vector: vec(0), topK: 10 });
      expect(got).toHaveLength(1);
      expect(got[0]?.key).toBe(k);
      expect(got[0]?.score).toBeCloseTo(0, 5);
      expect(got[0]?.type).toBe("common.Message");
      expect(got[0]?.metadata).toEqual({ round: 1, done: true });
    });

    it("returns metadata as stored, and {} when there was none", async () => {
      const c = conv(A, "c1");
      await index.upsert([
        rec(task(c, "m"), vec(0), "plan.Task", { name: "Plan the trip", score: 0.75, leaf: false }),
        rec(task(c, "n"), vec(0.3)),
      ]);
      const got = await index.query({ vector: vec(0), topK: 2 });
      expect(got.map((m) => m.metadata)).toEqual([{ name: "Plan the trip", score: 0.75, leaf: false }, {}]);
    });

    it("deletes by key; deleting missing keys is a no-op", async () => {
      const c = conv(A, "c1");
      await index.upsert([rec(task(c, "a"), vec(0)), rec(task(c, "b"), vec(0.1))]);
      await index.delete([task(c, "a"), task(c, "never-existed")]);
      await index.delete([]);
      expect((await index.query({ vector: vec(0), topK: 10 })).map((m) => m.key)).toEqual([task(c, "b")]);
    });

    it("refuses vectors of the wrong dimension, zero vectors and bad topK, writing nothing", async () => {
      const c = conv(A, "c1");
      const wrong = new Float32Array(DIM + 1).fill(0.5);
      await expect(
        index.upsert([rec(task(c, "ok"), vec(0)), rec(task(c, "bad"), wrong)]),
      ).rejects.toBeInstanceOf(ValidationError);
      await expect(index.upsert([rec(task(c, "zero"), new Float32Array(DIM))])).rejects.toBeInstanceOf(
        ValidationError,
      );
      await expect(index.query({ vector: wrong, topK: 1 })).rejects.toBeInstanceOf(ValidationError);
      await expect(index.query({ vector: vec(0), topK: 0 })).rejects.toBeInstanceOf(ValidationError);
      expect(await index.query({ vector: vec(0), topK: 10 })).toEqual([]);
    });

    it("refuses to open the index for another embedding space, naming both", async () => {
      await index.upsert([rec(task(conv(A, "c1"), "t"), vec(0))]);
      const other = { embedderId: "test:other-model@8", dimension: DIM };
      const err = await fx.reopen(other).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect(String((err as Error).message)).toContain(CONTRACT_SPACE.embedderId);
      expect(String((err as Error).message)).toContain(other.embedderId);
      await expect(
        fx.reopen({ embedderId: CONTRACT_SPACE.embedderId, dimension: 16 }),
      ).rejects.toBeInstanceOf(ConfigError);
    });

    it("survives a restart: a new instance over the same storage sees the same records", async () => {
      const c = conv(A, "c1");
      await index.upsert([rec(task(c, "a"), vec(0), "plan.Task", { n: 1 }), rec(task(c, "b"), vec(0.7))]);
      await index.delete([task(c, "b")]);
      const again = await fx.reopen(CONTRACT_SPACE);
      const got = await again.query({ vector: vec(0), topK: 5 });
      expect(got.map((m) => [m.key, m.type, m.metadata])).toEqual([[task(c, "a"), "plan.Task", { n: 1 }]]);
      expect(got[0]?.score).toBeCloseTo(1, 5);
    });

    it("writes and deletes batches larger than the backend's batch size", async () => {
      const n = (options.backendBatchSize ?? 500) + 37;
      const c = conv(A, "bulk");
      const records = Array.from({ length: n }, (_, i) =>
        rec(task(c, `t${i}`), vec(0.001 * i + 0.3, 3, 0.1)),
      );
      await index.upsert([rec(task(c, "nearest"), vec(0)), ...records]);
      const top = await index.query({ vector: vec(0), topK: 5, keyPrefix: `${c}/` });
      expect(top.map((m) => m.key)).toEqual([
        task(c, "nearest"),
        ...[0, 1, 2, 3].map((i) => task(c, `t${i}`)),
      ]);
      await index.delete(records.map((r) => r.key));
      expect((await index.query({ vector: vec(0), topK: 10 })).map((m) => m.key)).toEqual([
        task(c, "nearest"),
      ]);
    });
  });
}
