import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LocalEmbedder } from "../../shared/adapters/embeddings/local-embedder.ts";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { openLocalVectorIndex } from "../../shared/adapters/vectors/open-local-index.ts";
import {
  SqliteVectorIndex,
  type SqliteVectorIndexOptions,
} from "../../shared/adapters/vectors/sqlite-vector-index.ts";
import type { VectorMatch, VectorRecord } from "../../shared/ports/vector-index.ts";
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

vectorIndexContract("SQLite index, small: scored exactly in memory", fixture({}));
vectorIndexContract(
  "SQLite index with a graph from its first record (queries through the graph once it holds them)",
  fixture({ graphAbove: 0, exactBelow: 0, compressNeighbors: "float8" }),
);

/** Waits (bounded) until the index's graph holds every record. */
async function graphReady(index: SqliteVectorIndex): Promise<void> {
  for (let waited = 0; !index.graphReady; waited += 20) {
    if (waited > 90_000) throw new Error("the graph did not catch up within 90 s");
    await new Promise((r) => setTimeout(r, 20));
  }
}

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
        const index = SqliteVectorIndex.open(join(dir, "index.db"), space, {
          graphAbove: 1000,
          countRecords: true,
        });
        const flat = await LocalVectorIndex.open(join(dir, "flat"), space, { durable: false });
        const big = await outputs("big", 1500);
        for (let i = 0; i < big.length; i += 500) await index.upsert(big.slice(i, i + 500));
        await flat.upsert(big);
        const small = await outputs("small", 40);
        await index.upsert(small);
        await flat.upsert(small);
        // Past graphAbove the graph fills behind the writes; until then queries are exact.
        const [probe] = await embedder.embed(["hotels in Oslo"]);
        const early = { vector: probe as Float32Array, topK: 5, keyPrefix: tenant("big") };
        if (!index.graphReady)
          expect((await index.query(early)).map((m) => m.key)).toEqual(
            (await flat.query(early)).map((m) => m.key),
          );
        await graphReady(index);
        expect(index.size).toBe(1540);
        const queries = await embedder.embed(Array.from({ length: 20 }, (_, i) => text(i)));
        let found = 0;
        for (const vector of queries) {
          const q = { vector, topK: 5, type: "common.Message", keyPrefix: tenant("big") };
          const before = index.scored;
          const got = await index.query(q);
          // The flat index scores all 1,500; this one the graph's candidates.
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
        // run seen so that it catches a broken search (a random 5 of 1,500 finds about 0), not luck.
        expect(found / (5 * queries.length)).toBeGreaterThanOrEqual(0.3);
        await index.close();
      }),
    120_000,
  );

  it(
    "keeps sparse records past graphAbove in memory while scoring them exactly costs less than that many dense ones, and stops a half-built graph",
    () =>
      withDir(async (dir) => {
        const path = join(dir, "index.db");
        const records = await outputs("t", 400);
        // Counted as records, 400 pass graphAbove: a graph is begun, and the index stops before it is built.
        const counted = SqliteVectorIndex.open(path, space, { graphAbove: 100, countRecords: true });
        await counted.upsert(records.slice(0, 200));
        await counted.close();
        // Weighed by their non-zero share (the local embedder's fill a small part of 512), 400
        // sparse records cost less to score than 100 dense ones: queries stay exact, from memory,
        // and the half-built graph is left as it is.
        const weighed = SqliteVectorIndex.open(path, space, { graphAbove: 100 });
        await weighed.upsert(records.slice(200));
        const flat = await LocalVectorIndex.open(join(dir, "flat"), space, { durable: false });
        await flat.upsert(records);
        const [vector] = await embedder.embed(["museums in Kyoto"]);
        const q = { vector: vector as Float32Array, topK: 5, keyPrefix: tenant("t") };
        expect((await weighed.query(q)).map((m) => m.key)).toEqual((await flat.query(q)).map((m) => m.key));
        await weighed.upsert(await outputs("u", 50));
        await new Promise((r) => setTimeout(r, 300)); // the turns a graph would grow in
        expect(weighed.graphReady).toBe(false);
        const held = new Database(path, { readonly: true });
        const inGraph = held.prepare("SELECT count(*) AS n FROM ann").get() as { n: number };
        held.close();
        expect(Number(inGraph.n)).toBeLessThan(450);
        expect((await weighed.query(q)).map((m) => m.key)).toEqual((await flat.query(q)).map((m) => m.key));
        await weighed.close();
      }),
    120_000,
  );

  it("warm reads the records into memory a slice at a time, writes meanwhile included, and answers as the first query would", () =>
    withDir(async (dir) => {
      const path = join(dir, "index.db");
      const records = await outputs("t", 2500);
      const first = SqliteVectorIndex.open(path, space);
      await first.upsert(records);
      await first.close();
      const flat = await LocalVectorIndex.open(join(dir, "flat"), space, { durable: false });
      await flat.upsert(records);
      const index = SqliteVectorIndex.open(path, space);
      const warming = index.warm();
      // Written while it reads: a replaced record, a deleted one, a new one.
      const replaced = { ...(records[3] as VectorRecord), vector: (records[2000] as VectorRecord).vector };
      const gone = (records[1500] as VectorRecord).key;
      const added = (await outputs("t2", 1))[0] as VectorRecord;
      await Promise.all([index.upsert([replaced, added]), index.delete([gone])]);
      await flat.upsert([replaced, added]);
      await flat.delete([gone]);
      await warming;
      expect(index.size).toBe(2500);
      // The same matches as the flat index (its scores are summed in another order: the last bits differ).
      const same = (got: VectorMatch[], want: VectorMatch[]) => {
        expect(got.map((m) => [m.key, m.metadata])).toEqual(want.map((m) => [m.key, m.metadata]));
        got.forEach((m, i) => {
          expect(m.score).toBeCloseTo((want[i] as VectorMatch).score, 6);
        });
      };
      for (const probe of [replaced, records[1500] as VectorRecord, added, records[42] as VectorRecord]) {
        const q = { vector: probe.vector, topK: 5 };
        same(await index.query(q), await flat.query(q));
      }
      // A query while it reads takes the rest at once.
      const again = SqliteVectorIndex.open(path, space);
      const early = again.warm();
      const q = { vector: (records[7] as VectorRecord).vector, topK: 3, type: "common.Message" };
      same(await again.query(q), await flat.query(q));
      await early;
      same(await again.query(q), await flat.query(q));
      await index.close();
      await again.close();
    }));

  it(
    "builds its graph behind the writes once past graphAbove, and a restart half-way carries on",
    () =>
      withDir(async (dir) => {
        const path = join(dir, "index.db");
        const records = await outputs("t", 300);
        const first = SqliteVectorIndex.open(path, space, { graphAbove: 100, countRecords: true });
        await first.upsert(records.slice(0, 100));
        expect(first.graphReady).toBe(false); // at graphAbove: no graph yet
        await first.upsert(records.slice(100));
        await first.close(); // before the graph could hold them all
        const again = SqliteVectorIndex.open(path, space, {
          graphAbove: 100,
          exactBelow: 0,
          countRecords: true,
        });
        expect(again.size).toBe(300);
        const [vector] = await embedder.embed(["museums in Kyoto"]);
        const q = { vector: vector as Float32Array, topK: 5, keyPrefix: tenant("t") };
        const exact = await again.query(q); // answered from memory while the graph catches up
        await graphReady(again);
        const viaGraph = await again.query(q);
        expect(viaGraph).toHaveLength(5);
        // The graph holds every record: the exact best is among what it finds for a near-copy.
        const target = records[123] as VectorRecord;
        const near = await again.query({ vector: target.vector, topK: 1, keyPrefix: tenant("t") });
        expect(near[0]?.key).toBe(target.key);
        expect(exact).toHaveLength(5);
        // A replaced and a deleted record are replaced and deleted in the graph too.
        await again.upsert([{ ...target, metadata: { changed: true } }]);
        await again.delete([(records[7] as VectorRecord).key]);
        const seven = await again.query({
          vector: (records[7] as VectorRecord).vector,
          topK: 3,
          keyPrefix: tenant("t"),
        });
        expect(seven.map((m) => m.key)).not.toContain((records[7] as VectorRecord).key);
        expect(
          (await again.query({ vector: target.vector, topK: 1, keyPrefix: tenant("t") }))[0]?.metadata,
        ).toEqual({ changed: true });
        expect(again.size).toBe(299);
        await again.close();
      }),
    120_000,
  );

  it(
    "opens a file of the earlier format (the graph on the records' table) and keeps using its graph",
    () =>
      withDir(async (dir) => {
        const path = join(dir, "index.db");
        const db = new Database(path);
        db.exec(
          `CREATE TABLE vector_space (embedder_id TEXT NOT NULL, dimension INTEGER NOT NULL);
           CREATE TABLE vectors (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, type TEXT NOT NULL,
             metadata TEXT NOT NULL, e F32_BLOB(${space.dimension}) NOT NULL);
           CREATE INDEX vectors_type_key ON vectors (type, key);
           CREATE INDEX vectors_ann ON vectors (libsql_vector_idx(e, 'metric=cosine'));`,
        );
        db.prepare("INSERT INTO vector_space VALUES (?, ?)").run(space.embedderId, space.dimension);
        const records = await outputs("t", 50);
        const put = db.prepare(
          "INSERT INTO vectors (key, type, metadata, e) VALUES (?, ?, '{}', vector32(?))",
        );
        for (const r of records) put.run(r.key, r.type, JSON.stringify([...r.vector]));
        db.close();
        const index = SqliteVectorIndex.open(path, space, { exactBelow: 0 });
        expect(index.graphReady).toBe(true);
        expect(index.size).toBe(50);
        const target = records[9] as VectorRecord;
        expect((await index.query({ vector: target.vector, topK: 1 }))[0]?.key).toBe(target.key);
        await index.upsert([{ ...target, metadata: { again: 1 } }]);
        expect((await index.query({ vector: target.vector, topK: 1 }))[0]?.metadata).toEqual({ again: 1 });
        await index.close();
      }),
    60_000,
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
