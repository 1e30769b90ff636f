import { spawn } from "node:child_process";
import { statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteDatabase } from "../../shared/adapters/local/sqlite-database.ts";
import { UnavailableError } from "../../shared/kernel/errors.ts";

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

  it("a write resolves once made: what the process reads sees it before the turn commits", async () => {
    const db = open();
    await db.write(() => insert(db, "a"));
    expect(rows(db)).toEqual(["a"]);
    await db.untilDurable(); // ":memory:" has no disk: the barrier waits for the commit alone
    await db.close();
  });

  it("changes that throw half-way undo the whole turn, and the database then refuses every write", async () => {
    const db = open();
    await db.write(() => insert(db, "before"));
    await db.untilDurable(); // committed
    const rolledBack: string[] = [];
    db.onRollback(() => rolledBack.push("cleared"));
    await db.write(() => insert(db, "a")); // acknowledged, not yet committed
    const broken = db.write(() => () => {
      insert(db, "b")();
      insert(db, "a")(); // a duplicate key: the change fails after it changed something
    });
    await expect(broken).rejects.toThrow(/A write failed half-way .* check the disk and restart Arbor/);
    // The turn is gone, "a" with it although it was acknowledged: nothing may build on it.
    expect(rows(db)).toEqual(["before"]);
    expect(rolledBack).toEqual(["cleared"]);
    await expect(db.write(() => insert(db, "c"))).rejects.toBeInstanceOf(UnavailableError);
    await expect(db.untilDurable()).rejects.toBeInstanceOf(UnavailableError);
    await db.close();
  });
});

/** An fsync the test holds until it lets go, or fails. */
function heldFsync() {
  const calls: { release: () => void; fail: (e: Error) => void }[] = [];
  const fsync = () =>
    new Promise<void>((release, fail) => {
      calls.push({ release, fail });
    });
  return { fsync, calls };
}

const settled = async (p: Promise<unknown>) => {
  let state = "pending";
  p.then(
    () => {
      state = "resolved";
    },
    () => {
      state = "rejected";
    },
  );
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  return state;
};

describe("SqliteDatabase durability (output commit)", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-db-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const open = (options: { syncEachWrite?: boolean; fsync: () => Promise<void> }) => {
    const db = new SqliteDatabase({ path: join(dir, "a.db"), ...options });
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    return db;
  };
  const insert = (db: SqliteDatabase, v: string) => () => () => db.sql("INSERT INTO t (v) VALUES (?)").run(v);

  it("untilDurable waits for the turn's commit and for the fsync that covers it", async () => {
    const disk = heldFsync();
    const db = open({ fsync: disk.fsync });
    await db.write(insert(db, "a")); // made, not yet committed
    expect(disk.calls).toHaveLength(0);
    const barrier = db.untilDurable();
    expect(await settled(barrier)).toBe("pending");
    expect(disk.calls).toHaveLength(1); // the turn committed; its fsync started in the background
    disk.calls[0]?.release();
    expect(await settled(barrier)).toBe("resolved");
    // Nothing new since: the barrier does not fsync again.
    await db.untilDurable();
    expect(disk.calls).toHaveLength(1);
    const closing = db.close();
    await closing;
  });

  it("a commit made while an fsync runs waits for the next fsync, which covers every commit before it", async () => {
    const disk = heldFsync();
    const db = open({ fsync: disk.fsync });
    const nextTurn = () => new Promise((r) => setImmediate(r));
    await db.write(insert(db, "a"));
    await nextTurn(); // "a" committed
    await db.write(insert(db, "b"));
    await nextTurn();
    await db.write(insert(db, "c"));
    const barrier = db.untilDurable();
    await nextTurn();
    disk.calls[0]?.release(); // covered only "a"
    expect(await settled(barrier)).toBe("pending");
    expect(disk.calls).toHaveLength(2); // one more fsync for "b" and "c" together
    disk.calls[1]?.release();
    expect(await settled(barrier)).toBe("resolved");
    await db.close();
  });

  it("syncEachWrite: no write resolves before its commit is on disk", async () => {
    const disk = heldFsync();
    const db = open({ fsync: disk.fsync, syncEachWrite: true });
    const write = db.write(insert(db, "a"));
    expect(await settled(write)).toBe("pending");
    disk.calls[0]?.release();
    expect(await settled(write)).toBe("resolved");
    await db.close();
  });

  it("a failed fsync fails the barrier and every later write, saying what to do", async () => {
    const disk = heldFsync();
    const db = open({ fsync: disk.fsync });
    await db.write(insert(db, "a"));
    const barrier = db.untilDurable();
    await settled(barrier); // the turn commits, its fsync starts
    disk.calls[0]?.fail(new Error("EIO: i/o error"));
    await expect(barrier).rejects.toThrow(
      /Could not flush .*a\.db-wal to disk \(EIO: i\/o error\); check the disk and restart Arbor/,
    );
    await expect(db.untilDurable()).rejects.toBeInstanceOf(UnavailableError);
    await expect(db.write(insert(db, "b"))).rejects.toBeInstanceOf(UnavailableError);
    await db.close();
  });
});

describe("SqliteDatabase and another process holding the write lock", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-db-busy-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const insert = (db: SqliteDatabase, v: string) => () => () => db.sql("INSERT INTO t (v) VALUES (?)").run(v);
  const rows = (db: SqliteDatabase) =>
    (db.sql("SELECT v FROM t ORDER BY v").all() as { v: string }[]).map((r) => r.v);

  it("a write that finds the database locked fails alone, at once, with UnavailableError, and poisons nothing", async () => {
    const db = new SqliteDatabase({ path: join(dir, "a.db"), fsync: async () => {} });
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    await db.write(insert(db, "before"));
    await db.untilDurable();
    const other = new Database(join(dir, "a.db"));
    other.exec("BEGIN IMMEDIATE");
    const started = Date.now();
    const refused = await db.write(insert(db, "a")).catch((e: unknown) => e);
    expect(Date.now() - started).toBeLessThan(2500); // not SQLite's old 5 s wait on the event loop
    expect(refused).toBeInstanceOf(UnavailableError);
    expect((refused as UnavailableError).message).toMatch(/locked by another process; try again/);
    expect(db.unwritable).toBeUndefined();
    other.exec("ROLLBACK");
    other.close();
    await db.write(insert(db, "b"));
    await db.untilDurable();
    expect(rows(db)).toEqual(["b", "before"]);
    await db.close();
  });

  it("a COMMIT that finds the database busy is tried again, not taken for a lost turn", async () => {
    const db = new SqliteDatabase({ path: join(dir, "b.db"), fsync: async () => {} });
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    let busy = 2;
    db.beforeCommit(() => {
      if (busy-- > 0) throw Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" });
    });
    await db.write(insert(db, "a"));
    await db.untilDurable(); // committed on the third try
    expect(busy).toBe(-1);
    expect(db.unwritable).toBeUndefined();
    await db.write(insert(db, "b"));
    await db.untilDurable();
    expect(rows(db)).toEqual(["a", "b"]);
    await db.close();
  });
  it("opening the file while another process holds it waits for it, instead of failing to start", async () => {
    const file = join(dir, "c.db");
    // Made by a bare connection that has run no statement: a connection that has read keeps the
    // file (libsql) until its statements are collected, and the other process could not take it.
    const first = new Database(file);
    first.exec("PRAGMA journal_mode = WAL");
    first.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    first.close();
    // Another process takes the file whole for a moment (as a checkpoint or a recovery may).
    const child = spawn(
      process.execPath,
      [
        "-e",
        `const Database = require("libsql");
         const db = new Database(${JSON.stringify(file)});
         db.exec("PRAGMA locking_mode = EXCLUSIVE");
         db.exec("BEGIN EXCLUSIVE"); db.exec("INSERT INTO t VALUES ('other')"); db.exec("COMMIT");
         process.stdout.write("held\\n");
         setTimeout(() => db.close(), 500);`,
      ],
      { cwd: process.cwd(), stdio: ["ignore", "pipe", "inherit"] },
    );
    const exited = new Promise((resolve) => child.on("exit", resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (d) => String(d).includes("held") && resolve());
      child.on("exit", (code) =>
        reject(new Error(`the other process ended (${code}) before it held the file`)),
      );
    });
    const db = new SqliteDatabase({ path: file, fsync: async () => {} }); // threw "database is locked"
    await db.write(insert(db, "mine"));
    await db.untilDurable();
    expect(rows(db)).toEqual(["mine", "other"]);
    await db.close();
    await exited;
  });
});

describe("SqliteDatabase checkpoints", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-db-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("a small database keeps SQLite's own checkpoints, however big its WAL grows: no thread to start", async () => {
    const file = join(dir, "small.db");
    const db = new SqliteDatabase({ path: file, fsync: async () => {} });
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    const big = "x".repeat(20_000);
    for (let i = 0; i < 150; i++) {
      await db.write(() => () => db.sql("INSERT INTO t (v) VALUES (?)").run(`${i}${big}`));
      await db.untilDurable();
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(
      (db.sql("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number }).wal_autocheckpoint,
    ).toBe(1000);
    await db.close();
  });

  it("once the WAL passes 2 MiB (in a database past its size threshold) it is checkpointed on a thread of its own, not inside a COMMIT on the event loop", async () => {
    const file = join(dir, "a.db");
    const db = new SqliteDatabase({
      path: file,
      fsync: async () => {},
      checkpointThreadAt: { databaseBytes: 0 },
    });
    db.exec("CREATE TABLE t (v TEXT PRIMARY KEY)");
    let external = 0;
    db.onExternalChange(() => external++);
    const autoCheckpoint = () =>
      (db.sql("PRAGMA wal_autocheckpoint").get() as { wal_autocheckpoint: number }).wal_autocheckpoint;
    expect(autoCheckpoint()).toBe(1000); // SQLite's own, until the thread is there
    const big = "x".repeat(20_000);
    for (let i = 0; i < 150; i++) {
      await db.write(() => () => db.sql("INSERT INTO t (v) VALUES (?)").run(`${i}${big}`));
      await db.untilDurable();
    }
    // Its own only as a backstop, past 64 MiB of WAL, once the thread is there.
    await expect.poll(autoCheckpoint, { timeout: 5000 }).toBe(16_384);
    // The thread copies the WAL into the database file (3 MB of rows), within about a second.
    await expect.poll(() => statSync(file).size, { timeout: 5000, interval: 100 }).toBeGreaterThan(3_000_000);
    await db.write(() => () => db.sql("INSERT INTO t (v) VALUES (?)").run("after"));
    await db.untilDurable();
    expect((db.sql("SELECT count(*) AS n FROM t").get() as { n: number }).n).toBe(151);
    // A checkpoint is not another process's commit: what the stores hold in memory stays valid.
    db.catchUp();
    expect(external).toBe(0);
    await db.close(); // the thread's connection closes first
    const check = new Database(file);
    expect((check.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n).toBe(151);
    check.close();
  });
});
