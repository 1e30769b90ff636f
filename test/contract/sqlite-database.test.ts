import { describe, expect, it } from "vitest";
import { SqliteDatabase } from "../../shared/adapters/local/sqlite-database.ts";
import { UnavailableError } from "../../shared/errors.ts";

describe("SqliteDatabase group commit", () => {
  const open = () => {
    const db = new SqliteDatabase({ path: ":memory:" });
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    return db;
  };
  const insert = (db: SqliteDatabase, v: string) => () => db.sql("INSERT INTO t (v) VALUES (?)").run(v);
  const rows = (db: SqliteDatabase) =>
    (db.sql("SELECT v FROM t ORDER BY v").all() as { v: string }[]).map((r) => r.v);

  it("a failed check fails only its own write", async () => {
    const db = open();
    const results = await Promise.allSettled([
      db.write(() => insert(db, "a")),
      db.write(() => {
        throw new Error("condition does not hold");
      }),
      db.write(() => insert(db, "b")),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(rows(db)).toEqual(["a", "b"]);
    await db.close();
  });

  it("changes that throw half-way undo the whole group, and every write of it rejects", async () => {
    const db = open();
    const rolledBack: string[] = [];
    db.onRollback(() => rolledBack.push("cleared"));
    const first = db.write(() => insert(db, "a"));
    const broken = db.write(() => () => {
      insert(db, "b")();
      insert(db, "a")(); // a duplicate key: the change fails after it changed something
    });
    await expect(first).rejects.toBeInstanceOf(UnavailableError);
    await expect(broken).rejects.toBeInstanceOf(UnavailableError);
    expect(rows(db)).toEqual([]);
    expect(rolledBack).toEqual(["cleared"]);
    // The next turn starts a new group.
    await db.write(() => insert(db, "c"));
    expect(rows(db)).toEqual(["c"]);
    await db.close();
  });
});
