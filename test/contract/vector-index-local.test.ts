import { appendFile, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { ConfigError } from "../../shared/kernel/errors.ts";
import type { VectorMatch, VectorQuery, VectorRecord } from "../../shared/ports/vector-index.ts";
import { CONTRACT_SPACE, vectorIndexContract } from "./vector-index.contract.ts";

vectorIndexContract("local flat index on disk", async (space) => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-vectors-"));
  return {
    index: await LocalVectorIndex.open(dir, space),
    reopen: (s) => LocalVectorIndex.open(dir, s),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe("LocalVectorIndex files", () => {
  const unit = (i: number) => {
    const v = new Float32Array(CONTRACT_SPACE.dimension);
    v[i % v.length] = 1;
    return v;
  };

  const key = (i: number) => `cld:common.Tenant.t/plan.Task.k${i}`;
  const withIndex = async (body: (dir: string) => Promise<void>) => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-vectors-"));
    try {
      await body(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };

  it("appends changes to one log, batching writes that arrive together; no temporary files", () =>
    withIndex(async (dir) => {
      const index = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          index.upsert([{ key: key(i), vector: unit(i), type: "plan.Task" }]),
        ),
      );
      await index.delete([key(3)]);
      expect((await readdir(dir)).sort()).toEqual(["index.json", "vectors.log"]);
      const lines = (await readFile(join(dir, "vectors.log"), "utf8")).trimEnd().split("\n");
      expect(lines).toHaveLength(21);
      const reopened = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      expect(reopened.size).toBe(19);
      // unit(i) repeats every 8 keys; key 3 was deleted.
      const exact = async (i: number) =>
        (await reopened.query({ vector: unit(i), topK: 5 })).filter((m) => m.score > 0.999).map((m) => m.key);
      expect(await exact(5)).toEqual([key(13), key(5)]);
      expect(await exact(3)).toEqual([key(11), key(19)]);
    }));

  it("a key deleted while its upsert is still being written stays deleted", () =>
    withIndex(async (dir) => {
      const index = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      await Promise.all([
        index.upsert([{ key: key(1), vector: unit(1), type: "plan.Task" }]),
        index.delete([key(1)]),
      ]);
      expect(index.size).toBe(0);
      expect((await LocalVectorIndex.open(dir, CONTRACT_SPACE)).size).toBe(0);
    }));

  it("rewrites the log compactly once it is mostly replaced records", () =>
    withIndex(async (dir) => {
      const index = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      for (let round = 0; round < 60; round++)
        await index.upsert(
          Array.from({ length: 20 }, (_, i) => ({ key: key(i), vector: unit(i + round), type: "plan.Task" })),
        );
      const lines = (await readFile(join(dir, "vectors.log"), "utf8")).trimEnd().split("\n");
      expect(lines.length).toBeLessThan(1100);
      const reopened = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      expect(reopened.size).toBe(20);
      const [best] = await reopened.query({ vector: unit(59), topK: 1 });
      expect(best?.key).toBe(key(0)); // the last round wrote unit(0 + 59) under key 0
    }));

  it("drops a torn last line (a crash mid-append) and refuses a corrupt one in the middle", () =>
    withIndex(async (dir) => {
      const index = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      await index.upsert([{ key: key(0), vector: unit(0), type: "plan.Task" }]);
      await appendFile(join(dir, "vectors.log"), '{"put":{"key":"cld:common.Tena');
      expect((await LocalVectorIndex.open(dir, CONTRACT_SPACE)).size).toBe(1);
      expect((await readFile(join(dir, "vectors.log"), "utf8")).endsWith("\n")).toBe(true);
      await appendFile(join(dir, "vectors.log"), "{not json\n");
      await expect(LocalVectorIndex.open(dir, CONTRACT_SPACE)).rejects.toThrow(/line 2 of vectors.log/);
      await writeFile(join(dir, "index.json"), "{not json");
      await expect(LocalVectorIndex.open(dir, CONTRACT_SPACE)).rejects.toBeInstanceOf(ConfigError);
    }));

  it("queries give what scoring every record densely and sorting them all gives, scores bit for bit", () =>
    withIndex(async (dir) => {
      // Sparse vectors are stored as their non-zeros, dense ones whole, and the best are kept in a
      // small heap; the reference is the plain way: a dense dot product over all dimensions, in
      // order, for every record, then a full sort.
      const space = { embedderId: "test:reference@64", dimension: 64 };
      let seed = 7;
      const random = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
      };
      const vector = (nonZeros: number) => {
        const v = new Float32Array(space.dimension);
        for (let n = 0; n < nonZeros; ) {
          const d = Math.floor(random() * v.length);
          if (v[d] !== 0) continue;
          v[d] = random() * 2 - 1;
          n++;
        }
        return v;
      };
      // Sparse (1 to 8 non-zeros), just under, at and over half the dimension, and dense.
      const shapes = [1, 2, 3, 8, 31, 32, 33, 64];
      const tenants = ["t1", "t10", "t2"];
      const records = new Map<string, VectorRecord>();
      const upsert = async (batch: VectorRecord[]) => {
        await index.upsert(batch);
        for (const r of batch) records.set(r.key, r);
      };
      let index = await LocalVectorIndex.open(dir, space, { durable: false });
      const vectors: Float32Array[] = [];
      for (let i = 0; i < 300; i++) {
        // Every fifth record repeats an earlier vector: equal scores, ranked by key.
        const v =
          i % 5 === 4 ? (vectors[Math.floor(random() * i)] as Float32Array) : vector(shapes[i % 8] as number);
        vectors.push(v);
      }
      const recordAt = (i: number, v: Float32Array): VectorRecord => ({
        key: `cld:common.Tenant.${tenants[i % 3]}/common.Conversation.c${i % 4}/x${i}`,
        vector: v,
        type: i % 7 === 0 ? "plan.Task" : "common.Message",
        metadata: { i },
      });
      await upsert(vectors.slice(0, 200).map((v, i) => recordAt(i, v)));
      await upsert(vectors.slice(200).map((v, i) => recordAt(i + 200, v)));
      // Replace some records (another vector, sometimes another type), delete others.
      await upsert(
        [3, 14, 15, 92, 65].map((i) => ({
          ...recordAt(i, vector(shapes[i % 5] as number)),
          type: "plan.Task",
        })),
      );
      const gone = [5, 6, 7, 150, 299].map((i) => recordAt(i, new Float32Array()).key);
      await index.delete(gone);
      for (const k of gone) records.delete(k);

      const reference = (q: VectorQuery): VectorMatch[] => {
        let qNorm = 0;
        for (const x of q.vector) qNorm += x * x;
        qNorm = Math.sqrt(qNorm);
        const scored: VectorMatch[] = [];
        for (const r of records.values()) {
          if (q.type !== undefined && r.type !== q.type) continue;
          if (q.keyPrefix !== undefined && !r.key.startsWith(q.keyPrefix)) continue;
          let dot = 0;
          for (let d = 0; d < q.vector.length; d++) dot += (q.vector[d] as number) * (r.vector[d] as number);
          const norm = Math.sqrt(r.vector.reduce((s, x) => s + x * x, 0));
          scored.push({ key: r.key, score: dot / (qNorm * norm), type: r.type, metadata: r.metadata ?? {} });
        }
        scored.sort((a, b) => b.score - a.score || (a.key < b.key ? -1 : 1));
        return scored.slice(0, q.topK);
      };
      const queries: VectorQuery[] = [];
      for (let n = 0; n < 20; n++) {
        const q = n % 4 === 0 ? (vectors[n] as Float32Array) : vector(shapes[n % 8] as number);
        for (const topK of [1, 3, 10, 500])
          for (const type of [undefined, "common.Message", "plan.Task", "no.Such"])
            for (const keyPrefix of [
              undefined,
              "",
              "cld:common.Tenant.t1",
              "cld:common.Tenant.t1/",
              "cld:common.Tenant.t2/common.Conversation.c1/",
              "cld:common.Tenant.t3/",
              "zzz",
            ])
              queries.push({
                vector: q,
                topK,
                ...(type === undefined ? {} : { type }),
                ...(keyPrefix === undefined ? {} : { keyPrefix }),
              });
      }
      const check = async () => {
        let ties = 0;
        for (const q of queries) {
          const got = await index.query(q);
          expect(got).toEqual(reference(q));
          ties += got.filter((m, i) => i > 0 && m.score === got[i - 1]?.score).length;
        }
        expect(ties).toBeGreaterThan(100); // the tie-break is exercised
      };
      await check();
      index = await LocalVectorIndex.open(dir, space, { durable: false }); // read back from the log
      expect(index.size).toBe(records.size);
      await check();
    }));
});
