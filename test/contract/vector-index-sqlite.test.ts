import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalEmbedder } from "../../shared/adapters/embeddings/local-embedder.ts";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { openLocalVectorIndex } from "../../shared/adapters/vectors/open-local-index.ts";
import {
  SqliteVectorIndex,
  type SqliteVectorIndexOptions,
} from "../../shared/adapters/vectors/sqlite-vector-index.ts";
import type { VectorRecord } from "../../shared/ports/vector-index.ts";
import { vectorIndexContract } from "./vector-index.contract.ts";

const fixture =
  (options: SqliteVectorIndexOptions) => async (space: Parameters<typeof SqliteVectorIndex.open>[1]) => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-vectors-db-"));
    const path = join(dir, "index.db");
    const opened: SqliteVectorIndex[] = [];
    const open = (s: typeof space) => {
      const index = SqliteVectorIndex.open(path, s, options);
      opened.push(index);
      return index;
    };
    return {
      index: open(space),
      reopen: async (s: typeof space) => open(s),
      cleanup: async () => {
        for (const index of opened) await index.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  };

vectorIndexContract("libSQL DiskANN index, small ranges scored exactly", fixture({}));
vectorIndexContract(
  "libSQL DiskANN index, every query through the graph",
  fixture({ exactBelow: 0, compressNeighbors: "float8" }),
);

describe("SqliteVectorIndex at scale and as the local default", () => {
  const withDir = async (body: (dir: string) => Promise<void>) => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-vectors-db-"));
    try {
      await body(dir);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  };
  const embedder = new LocalEmbedder();
  const space = { embedderId: embedder.id, dimension: embedder.dimension };
  const topics = [
    "flights",
    "hotels",
    "budget",
    "weather",
    "museums",
    "trains",
    "food",
    "visas",
    "insurance",
  ];
  const places = ["Lisbon", "Oslo", "Kyoto", "Lima", "Cairo", "Quebec", "Perth", "Tallinn"];
  // Texts of 14 words from a vocabulary of 400, half of them from one of 20 themes: varied enough
  // that the exact best is not one of many equal scores.
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const word = (theme: number) =>
    `w${random() < 0.5 ? theme * 20 + Math.floor(random() * 20) : Math.floor(random() * 400)}`;
  const text = (i: number) => {
    const theme = Math.floor(random() * 20);
    return `${Array.from({ length: 14 }, () => word(theme)).join(" ")} ${topics[i % topics.length]} ${places[i % places.length]}`;
  };
  const tenant = (t: string) => `cld:common.Tenant.${t}/`;
  const outputs = async (t: string, n: number): Promise<VectorRecord[]> => {
    const vectors = await embedder.embed(Array.from({ length: n }, (_, i) => text(i)));
    return vectors.map((vector, i) => ({
      key: `${tenant(t)}common.Conversation.c${i % 97}/plan.Task.t${i}/common.Message.m${i}`,
      vector,
      type: "common.Message",
      metadata: { i },
    }));
  };

  it(
    "scores a bounded number of records per query as one tenant's history grows, finding a good share of the exact top 5",
    () =>
      withDir(async (dir) => {
        const index = SqliteVectorIndex.open(join(dir, "index.db"), space);
        const flat = await LocalVectorIndex.open(join(dir, "flat"), space, { durable: false });
        const big = await outputs("big", 3000);
        for (let i = 0; i < big.length; i += 500) await index.upsert(big.slice(i, i + 500));
        await flat.upsert(big);
        const small = await outputs("small", 40);
        await index.upsert(small);
        await flat.upsert(small);
        const queries = await embedder.embed(Array.from({ length: 20 }, (_, i) => text(i)));
        let found = 0;
        for (const vector of queries) {
          const q = { vector, topK: 5, type: "common.Message", keyPrefix: tenant("big") };
          const before = index.scored;
          const got = await index.query(q);
          // The flat index scores all 3,000; this one the graph's candidates.
          expect(index.scored - before).toBeLessThanOrEqual(200);
          expect(got).toHaveLength(5);
          expect(got.every((m) => m.key.startsWith(tenant("big")))).toBe(true);
          // Recall: how many of the exact top 5 it found (a tie with the exact 5th counts).
          const fifth = (await flat.query(q))[4]?.score as number;
          found += got.filter((m) => m.score >= fifth - 1e-4).length;
          // A small tenant beside a big one gets exactly what the flat index gives.
          const inSmall = { ...q, keyPrefix: tenant("small") };
          const exact = await flat.query(inSmall);
          const mine = await index.query(inSmall);
          expect(mine.map((m) => m.key)).toEqual(exact.map((m) => m.key));
        }
        // Approximate: 0.44-0.8 of the exact top 5 over runs here (libSQL does not build the
        // same graph twice, and this mix of a few topics and places is full of near-ties); the
        // bench measures 0.96 on 10,000 outputs of another mix. The bound is set below the worst
        // run seen so that it catches a broken search (a random 5 of 3,000 finds about 0), not luck.
        expect(found / (5 * queries.length)).toBeGreaterThanOrEqual(0.3);
        await index.close();
      }),
    120_000,
  );

  it(
    "migrates the flat index an older data folder holds, once, and keeps answering the same",
    () =>
      withDir(async (dir) => {
        const folder = join(dir, "vectors");
        const flat = await LocalVectorIndex.open(join(folder, "local_x"), space);
        const records = await outputs("t", 60);
        await flat.upsert(records);
        await flat.delete([records[0]?.key as string]);
        const [vector] = await embedder.embed(["hotels in Oslo"]);
        const q = { vector: vector as Float32Array, topK: 7, keyPrefix: tenant("t") };
        const before = await flat.query(q);

        const index = await openLocalVectorIndex(folder, "local_x", space);
        expect(index.size).toBe(59);
        const after = await index.query(q);
        expect(after.map((m) => [m.key, m.metadata])).toEqual(before.map((m) => [m.key, m.metadata]));
        for (const [i, m] of after.entries()) expect(m.score).toBeCloseTo(before[i]?.score as number, 5);
        expect((await readdir(folder)).sort()).toEqual([
          "local_x.db",
          "local_x.db-shm",
          "local_x.db-wal",
          "local_x.migrated",
        ]);
        await index.upsert([{ ...(records[1] as VectorRecord), metadata: { changed: true } }]);
        await index.close();

        const again = await openLocalVectorIndex(folder, "local_x", space);
        expect(again.size).toBe(59);
        expect(
          (await again.query({ ...q, topK: 60 })).find((m) => m.key === records[1]?.key)?.metadata,
        ).toEqual({
          changed: true,
        });
        await again.close();
      }),
    60_000,
  );
});
