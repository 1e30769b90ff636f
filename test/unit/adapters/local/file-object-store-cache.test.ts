import { mkdtemp, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileObjectStore } from "../../../../shared/adapters/local/file-object-store.ts";
import { listAllKeys } from "../../../../shared/ports/object-store.ts";

/**
 * The local object store's in-memory cache must never disagree with the files: whatever mix of
 * writes, reads, deletes and listings runs at once, a fresh store reading the same folder from disk
 * sees what the cached one answers.
 */
const text = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString("utf8"));

describe("FileObjectStore with the in-memory cache", () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "arbor-cache-"));
  });
  afterEach(() => rm(root, { recursive: true, force: true }));

  it("answers a read after a write from memory", async () => {
    const store = new FileObjectStore({ root, cache: true });
    await store.put("a/b", "one");
    await unlink(join(root, "a+", "b")); // behind its back: memory still answers
    expect(text(await store.get("a/b"))).toBe("one");
  });

  it("knows keys that do not exist, and sees them once written", async () => {
    const store = new FileObjectStore({ root, cache: true });
    expect(await store.get("x/y")).toBeUndefined();
    expect(await listAllKeys(store, "x/")).toEqual([]);
    await store.put("x/y", "1");
    expect(text(await store.get("x/y"))).toBe("1");
    expect(await listAllKeys(store, "x/")).toEqual(["x/y"]);
    expect(await listAllKeys(store, "x/", { delimiter: "/" })).toEqual(["x/y"]);
  });

  it("keeps a listing current across writes and deletes at every depth", async () => {
    const store = new FileObjectStore({ root, cache: true });
    await store.put("t/a", "1");
    expect(await listAllKeys(store, "t/")).toEqual(["t/a"]); // now cached
    await store.put("t/b/c", "2");
    await store.put("t/b/d/e", "3");
    expect(await listAllKeys(store, "t/")).toEqual(["t/a", "t/b/c", "t/b/d/e"]);
    const folders = await store.list("t/", { delimiter: "/" });
    expect(folders).toMatchObject({ keys: ["t/a"], prefixes: ["t/b/"] });
    await store.delete("t/a");
    expect(await listAllKeys(store, "t/")).toEqual(["t/b/c", "t/b/d/e"]);
  });

  it("never lets a slow read put an older document back over a newer one", async () => {
    await writeFile(join(root, "k"), "old");
    const store = new FileObjectStore({ root, cache: true });
    // The read starts first (from disk); the write starts before it ends.
    const reading = store.get("k");
    const writing = store.put("k", "new");
    const [read] = await Promise.all([reading, writing]);
    expect(["old", "new"]).toContain(text(read));
    expect(text(await store.get("k"))).toBe("new");
  });

  it("writes one key in call order, so memory ends where the disk does", async () => {
    const store = new FileObjectStore({ root, cache: true });
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.put("same", `v${i}`)));
    expect(text(await store.get("same"))).toBe("v19");
    expect(text(await new FileObjectStore({ root }).get("same"))).toBe("v19");
  });

  it("agrees with the disk after many concurrent writes, reads, deletes and listings", async () => {
    const cached = new FileObjectStore({ root, cache: { maxBytes: 2048 } }); // small: eviction happens too
    const keys = ["p/a", "p/b", "p/c/d", "p/c/e", "p/f/g/h", "q/a"];
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let round = 0; round < 30; round++) {
      const ops = Array.from({ length: 12 }, (_, i) => {
        const key = keys[random(keys.length)] as string;
        switch (random(4)) {
          case 0:
            return cached.put(key, `${key}@${round}.${i}`.repeat(1 + random(40)));
          case 1:
            return cached.delete(key);
          case 2:
            return cached.get(key);
          default:
            return listAllKeys(cached, random(2) ? "p/" : "p/c/", random(2) ? { delimiter: "/" } : {});
        }
      });
      await Promise.all(ops);
      const disk = new FileObjectStore({ root });
      for (const prefix of ["p/", "p/c/", "q/", ""]) {
        expect(await listAllKeys(cached, prefix)).toEqual(await listAllKeys(disk, prefix));
        expect(await cached.list(prefix, { delimiter: "/" })).toEqual(
          await disk.list(prefix, { delimiter: "/" }),
        );
      }
      for (const key of keys) expect(text(await cached.get(key))).toBe(text(await disk.get(key)));
    }
  });
});
