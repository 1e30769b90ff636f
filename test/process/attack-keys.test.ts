import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, BIN } from "../support/arbor-process.ts";

/**
 * `arbor keys` run as the worst users run it: several at once on one keys file (a script adding a
 * team's keys in parallel, a revoke while others add), and killed with kill -9 mid-write. Every
 * key a command said it added is in the file, a key a command said it revoked stays revoked, and
 * the file (and its lock) still opens after a kill.
 */
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-attack-keys-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const idsIn = async (dataDir: string) =>
  (JSON.parse(await readFile(join(dataDir, "api-keys.json"), "utf8")) as { keys: { id: string }[] }).keys
    .map((k) => k.id)
    .sort();

describe("arbor keys, several at once and killed mid-write", () => {
  it("keeps every key it said it added, and a revoked key revoked", async () => {
    const dataDir = join(dir, "parallel");
    const env = arborEnv(dataDir);
    await addKey(env, "user_victim");
    const ids = Array.from({ length: 5 }, (_, i) => `user_u${i}`);
    const runs = await Promise.all([
      ...ids.map((id) => arborCli(["keys", "add", "--id", id, "--tenant", "acme"], env)),
      arborCli(["keys", "revoke", "user_victim"], env),
    ]);
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    expect(runs.at(-1)?.stdout).toContain("Revoked");
    expect(await idsIn(dataDir)).toEqual(ids);
  }, 120_000);

  it("opens the file after kill -9 at any moment of a write, and the next write goes through", async () => {
    const dataDir = join(dir, "killed");
    const env = arborEnv(dataDir);
    await addKey(env, "user_first");
    for (const delay of [50, 150, 250, 350]) {
      const child = spawn(process.execPath, [BIN, "keys", "add", "--id", "user_killed", "--tenant", "acme"], {
        env,
        stdio: "ignore",
      });
      // Listened for at once: on a quick machine the write may end before the kill comes.
      const exited = new Promise((resolve) => child.once("exit", resolve));
      await sleep(delay);
      child.kill("SIGKILL");
      await exited;
      const listed = await arborCli(["keys", "list"], env);
      expect(listed.code, listed.stderr).toBe(0);
      expect(listed.stdout).toContain("user_first");
    }
    const after = await arborCli(["keys", "add", "--id", "user_after", "--tenant", "acme"], env);
    expect(after.code, after.stderr).toBe(0);
    expect(await idsIn(dataDir)).toContain("user_after");
  }, 120_000);
});
