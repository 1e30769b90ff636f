import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
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

  it("keeps one header and one vectors file, and no temporary files, after many writes", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-vectors-"));
    try {
      const index = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          index.upsert([{ key: `cld:common.Tenant.t/plan.Task.k${i}`, vector: unit(i), type: "plan.Task" }]),
        ),
      );
      const files = (await readdir(dir)).sort();
      expect(files).toEqual(["index.json", "vectors-20.f32"]);
      expect((await readFile(join(dir, "vectors-20.f32"))).length).toBe(20 * CONTRACT_SPACE.dimension * 4);
      expect((await LocalVectorIndex.open(dir, CONTRACT_SPACE)).size).toBe(20);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a corrupt header or a truncated vectors file with a clear error", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-vectors-"));
    try {
      const index = await LocalVectorIndex.open(dir, CONTRACT_SPACE);
      await index.upsert([{ key: "cld:common.Tenant.t/plan.Task.a", vector: unit(0), type: "plan.Task" }]);
      await writeFile(join(dir, "vectors-1.f32"), Buffer.alloc(5));
      await expect(LocalVectorIndex.open(dir, CONTRACT_SPACE)).rejects.toThrow(/holds 5 bytes/);
      await writeFile(join(dir, "index.json"), "{not json");
      await expect(LocalVectorIndex.open(dir, CONTRACT_SPACE)).rejects.toBeInstanceOf(ConfigError);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
