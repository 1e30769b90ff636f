import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * The commands that take --tenant, against a remote Arbor, which acts on ARBOR_KEY's tenant only:
 * an admin of acme who writes `--tenant beta` means beta, and must not change acme instead (apply
 * a team, revoke a key by id) nor be shown acme's as beta's. A --tenant that is not the key's is
 * refused before anything is done; the key's own tenant, or none, works as before.
 */
let dir: string;
let served: Served;
let remote: NodeJS.ProcessEnv;
let dataEnv: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-attack-tenant-"));
  dataEnv = arborEnv(join(dir, "data"));
  const ada = await addKey(dataEnv, "user_ada", "acme", ["admin"]);
  await addKey(dataEnv, "user_bea", "beta", ["admin"]);
  served = await startServe(dataEnv, ["--example", "offsite"]);
  remote = arborEnv(join(dir, "client"), { ARBOR_URL: served.url, ARBOR_KEY: ada });
  await writeFile(
    join(dir, "team.json"),
    JSON.stringify({ assistants: [{ name: "Only one", purpose: "Replaces the whole team" }] }),
  );
}, 60_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("a remote Arbor and --tenant", () => {
  it("refuses a --tenant that is not the key's, doing nothing, for team, keys, tools and graph", async () => {
    const before = await arborCli(["team", "show"], remote);
    expect(before.code, before.stderr).toBe(0);
    for (const args of [
      ["team", "apply", join(dir, "team.json"), "--tenant", "beta", "--yes"],
      ["team", "show", "--tenant", "beta"],
      ["keys", "revoke", "user_ada", "--tenant", "beta"],
      ["keys", "list", "--tenant", "beta"],
      ["tools", "ls", "--tenant", "beta"],
      ["graph", "query", "--tenant", "beta"],
    ]) {
      const run = await arborCli(args, remote);
      expect(run.code, `${args.join(" ")}: ${run.stdout}`).toBe(1);
      expect(run.stderr, args.join(" ")).toMatch(/--tenant beta.*tenant acme/);
    }
    // Nothing changed: acme's team is as it was, and ada's key still works.
    const after = await arborCli(["team", "show"], remote);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).toBe(before.stdout);
  }, 120_000);

  it("takes the key's own tenant, or none", async () => {
    for (const args of [
      ["tools", "ls", "--tenant", "acme"],
      ["keys", "list", "--tenant", "acme"],
      ["team", "show", "--tenant", "acme"],
      ["tools", "ls"],
    ]) {
      const run = await arborCli(args, remote);
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(0);
    }
  }, 120_000);
});
