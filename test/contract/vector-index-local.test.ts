import { appendFile, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LocalVectorIndex } from "../../shared/adapters/vectors/local-vector-index.ts";
import { ConfigError } from "../../shared/errors.ts";
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
});
