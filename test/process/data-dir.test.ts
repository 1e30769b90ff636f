import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedLlm } from "../../shared/adapters/llm/scripted-llm.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { GENERALIST } from "../scenarios/scenarios.ts";
import { addKey, arborCli, arborEnv, killAll, killHard, startServe } from "../support/arbor-process.ts";

/**
 * A data folder belongs to one process (real `arbor` child processes on one folder), and only its
 * owner may read what is in it.
 */
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-datadir-"));
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

describe("one process per data folder", () => {
  it("a second serve or run on the folder says which process holds it and exits non-zero; readers still read; kill -9 frees it", async () => {
    const env = arborEnv(join(dir, "shared"));
    const key = await addKey(env, "user_ada");
    const first = await startServe(env, ["--example", "offsite"]);
    // The tenant's first request gives it its team: something for a reader to read below.
    const posted = await fetch(`${first.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "hello" }),
    });
    expect(posted.status).toBe(202);

    const second = await arborCli(["serve", "--example", "offsite", "--port", "0"], env);
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(`process ${first.child.pid} (arbor serve`);
    expect(second.stderr).toMatch(/since \d{4}-\d\d-\d\dT/);
    expect(second.stderr).toContain(join(dir, "shared"));
    const run = await arborCli(["run", "--example", "offsite", "--yes"], env);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(`process ${first.child.pid} (arbor serve`);

    // Reading needs no lock: SQLite (WAL) gives a reader a consistent view beside the server.
    const listed = await arborCli(["ls"], { ...env, ARBOR_TENANT: "acme" });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain("common.Assistant");

    // kill -9 leaves no stale lock: the kernel let go of it with the process.
    await killHard(first);
    const next = await startServe(env, ["--example", "offsite"]);
    expect((await fetch(`${next.url}/healthz`)).status).toBe(200);
    await killHard(next);
  }, 180_000);
});

describe("only the owner reads the data", () => {
  it("creates the folder 0700 and every data file 0600, and tightens a folder an older Arbor left open", async () => {
    const dataDir = join(dir, "modes");
    // As an older Arbor (or a loose umask) left it: 0755 folders, 0644 files.
    mkdirSync(join(dataDir, "vectors", "old"), { recursive: true });
    const old = new Database(join(dataDir, "arbor.db"));
    old.exec("PRAGMA journal_mode = WAL");
    old.exec("CREATE TABLE leftover (x)");
    old.close();
    writeFileSync(join(dataDir, "vectors", "old", "index.log"), "");
    writeFileSync(join(dataDir, "notes.txt"), "the user's own file"); // not Arbor's: left alone
    for (const p of [dataDir, join(dataDir, "vectors"), join(dataDir, "vectors", "old")]) chmodSync(p, 0o755);
    for (const p of [join(dataDir, "arbor.db"), join(dataDir, "vectors", "old", "index.log")])
      chmodSync(p, 0o644);
    chmodSync(join(dataDir, "notes.txt"), 0o644);

    const rt = createLocalRuntime(
      { mode: "local", tenant: "acme", dataDir, durable: true },
      { lockAs: "a test" },
    );
    const engine = await createLocalEngine(rt, { llm: new ScriptedLlm([]) });
    try {
      await engine.registerAssistants("acme", GENERALIST); // writes rows and vectors
      await rt.untilDurable();
      expect(mode(dataDir)).toBe(0o700);
      for (const file of ["arbor.db", "arbor.db-wal", "arbor.db-shm", "arbor.lock"])
        expect([file, mode(join(dataDir, file))]).toEqual([file, 0o600]);
      const walk = (path: string): string[] =>
        statSync(path).isDirectory()
          ? [path, ...readdirSync(path).flatMap((e) => walk(join(path, e)))]
          : [path];
      const vectors = walk(join(dataDir, "vectors"));
      expect(vectors.length).toBeGreaterThan(3); // the old index and the new one
      for (const path of vectors)
        expect([path, mode(path)]).toEqual([path, statSync(path).isDirectory() ? 0o700 : 0o600]);
      expect(mode(join(dataDir, "notes.txt"))).toBe(0o644);
    } finally {
      await engine.close();
      await rt.close();
    }
  }, 60_000);
});
