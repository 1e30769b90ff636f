import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteDatabase } from "../../shared/adapters/local/sqlite-database.ts";
import { SqliteObjectStore, upperBound } from "../../shared/adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { listAllKeys } from "../../shared/ports/object-store.ts";
import { artifactStoreContract } from "./artifact-store.contract.ts";
import { objectStoreContract } from "./object-store.contract.ts";

/** A fresh store in a file of its own, with its cache. */
async function sqliteStore() {
  const dir = await mkdtemp(join(tmpdir(), "arbor-objects-"));
  const store = new SqliteObjectStore({ path: join(dir, "arbor.db") });
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

objectStoreContract("SQLite table (libsql), with its cache", sqliteStore);
artifactStoreContract("the SQLite table (libsql)", sqliteStore);

objectStoreContract("SQLite table (libsql), no cache", async () => {
  const store = new SqliteObjectStore({ path: ":memory:", cacheBytes: 0 });
  return { store, cleanup: () => store.close() };
});

describe("SqliteObjectStore", () => {
  it("upperBound is the least string above every string with the prefix", () => {
    expect(upperBound("a/b/")).toBe("a/b0");
    expect(upperBound("x\u{10ffff}")).toBe("y");
    expect(upperBound("\ud7ff")).toBe("\ue000");
    expect(upperBound("")).toBeUndefined();
    const prefix = "t/é/";
    const bound = upperBound(prefix) as string;
    for (const k of ["t/é/", "t/é/\u{10ffff}", "t/é/zzz/😀"])
      expect(Buffer.compare(Buffer.from(k), Buffer.from(bound))).toBe(-1);
  });

  it("shares a database with the state store: both durable and visible from a new connection", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-shared-"));
    try {
      const path = join(dir, "arbor.db");
      const db = new SqliteDatabase({ path });
      const objects = new SqliteObjectStore({ database: db });
      const state = new SqliteStateStore({ database: db });
      await Promise.all([
        objects.put("a/b", "hello"),
        state.transact([
          {
            op: "put",
            record: { key: "r", kind: "k", updatedAt: "2026-01-01T00:00:00.000Z", data: 1 },
            expectedVersion: 0,
          },
        ]),
      ]);
      await db.untilDurable(); // committed: visible from another connection
      const other = new SqliteObjectStore({ path, cacheBytes: 0 });
      expect(Buffer.from((await other.get("a/b")) as Uint8Array).toString()).toBe("hello");
      expect((await new SqliteStateStore({ path }).get("r"))?.version).toBe(1);
      await other.close();
      await state.close(); // not the owner: the database stays open
      await objects.put("a/c", "still open");
      await db.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a store that only reads answers with what another process wrote since, not what it held", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-object-reader-"));
    const text = async (s: SqliteObjectStore, key: string) => {
      const body = await s.get(key);
      return body === undefined ? undefined : Buffer.from(body).toString();
    };
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));
    try {
      const path = join(dir, "arbor.db");
      const writer = new SqliteObjectStore({ path });
      const reader = new SqliteObjectStore({ path }); // with its cache
      await writer.put("a/b", "one");
      await writer.untilDurable();
      expect(await text(reader, "a/b")).toBe("one");
      await writer.put("a/b", "two");
      await writer.untilDurable();
      await nextTurn(); // a reader looks once a turn
      expect(await text(reader, "a/b")).toBe("two"); // it once answered "one" until it wrote
      await writer.delete("a/b");
      await writer.untilDurable();
      await nextTurn();
      expect(await text(reader, "a/b")).toBeUndefined();
      await writer.close();
      await reader.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("folds a folder of many keys into one prefix, and pages across folders", async () => {
    const store = new SqliteObjectStore({ path: ":memory:" });
    await Promise.all(
      Array.from({ length: 600 }, (_, i) => store.put(`p/big/${String(i).padStart(4, "0")}`, "x")),
    );
    await Promise.all(["p/a", "p/c/1", "p/d", "p/e/f/g"].map((k) => store.put(k, "x")));
    expect(await store.list("p/", { delimiter: "/" })).toEqual({
      keys: ["p/a", "p/d"],
      prefixes: ["p/big/", "p/c/", "p/e/"],
    });
    const first = await store.list("p/", { delimiter: "/", limit: 2 });
    expect(first).toMatchObject({ keys: ["p/a"], prefixes: ["p/big/"] });
    const second = await store.list("p/", { delimiter: "/", limit: 2, cursor: first.cursor as string });
    expect(second).toMatchObject({ keys: ["p/d"], prefixes: ["p/c/"] });
    expect((await listAllKeys(store, "p/big/")).length).toBe(600);
    await expect(store.list("p/", { cursor: "not-ours" })).rejects.toBeInstanceOf(ValidationError);
    await store.close();
  });
});
