import { existsSync, statSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, ApiKeysSchema } from "../../shared/adapters/local/api-keys.ts";
import { addKey, arborCli, arborEnv, keyIn, killAll, startServe } from "../support/arbor-process.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor keys` and `arbor serve` as a person runs them (real child processes): serve refuses to
 * start without a keys file and `keys add` writes one, whose keys serve takes while it runs; the
 * list names each key by fingerprint and principal and never shows a key; a revoke by fingerprint
 * takes one key, by id all of a principal's; a running `arbor serve` stops taking a revoked key.
 */
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-keys-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("arbor keys add / arbor serve", () => {
  let dir: string;
  const env = (extra: Record<string, string> = {}) => arborEnv(join(dir, "data"), extra);
  const arbor = (args: string[], extra: Record<string, string> = {}) => arborCli(args, env(extra));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-serve-"));
  });
  afterAll(async () => {
    await killAll();
    await rm(dir, { recursive: true, force: true });
  });

  it("serve refuses to start without a keys file and says how to make a key; keys add writes one (0600) whose key authenticates", async () => {
    const keysFile = join(dir, "data", "api-keys.json");
    const refused = await arbor(["serve", "--example", "offsite"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(keysFile);
    expect(refused.stderr).toMatch(/npx arbor keys add --id user_<your-name>/);
    expect(existsSync(join(dir, "data", "arbor.db"))).toBe(false); // nothing was started

    const added = await arbor([
      "keys",
      "add",
      "--id",
      "user_ada",
      "--tenant",
      "acme",
      "--role",
      "admin",
      "--role",
      "ops",
    ]);
    expect(added.code).toBe(0);
    const key = keyIn(added.stdout);
    expect(key).toMatch(/^arbor_[A-Za-z0-9_-]{32}$/);
    expect(statSync(keysFile).mode & 0o777).toBe(0o600);
    const agent = await arbor(["keys", "add", "--id", "agent_partner"], { ARBOR_TENANT: "beta" });
    const agentKey = keyIn(agent.stdout);
    const keys = ApiKeys.load(keysFile);
    expect(keys.size).toBe(2);
    expect(await keys.authenticate(`Bearer ${key}`)).toEqual({
      actor: { id: "user_ada", kind: "human", capabilities: ["admin", "ops"] },
      caller: { tenant: "acme", roles: ["admin", "ops"] },
    });
    expect(await keys.authenticate(`Bearer ${agentKey}`)).toMatchObject({
      actor: { kind: "agent" },
      caller: { tenant: "beta" },
    });
    const bad = await arbor(["keys", "add", "--id", "ada"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--id: user_<name> or agent_<name>/);
    expect(ApiKeys.load(keysFile).size).toBe(2);
  }, 60_000);

  it("serve listens with the keys of ARBOR_API_KEYS_FILE, and stops cleanly on SIGTERM", async () => {
    const keysFile = join(dir, "elsewhere", "keys.json");
    const added = await arbor(["keys", "add", "--id", "user_cy", "--tenant", "acme"], {
      ARBOR_API_KEYS_FILE: keysFile,
    });
    const key = keyIn(added.stdout);
    const started = await startServe(
      env({ ARBOR_API_KEYS_FILE: keysFile, ARBOR_DATA_DIR: join(dir, "served") }),
      ["--example", "offsite"],
    );
    const { url } = started;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })).status).toBe(401);
    const ok = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: JSON.stringify({ text: "Plan the offsite", mode: "lazy" }),
    });
    expect(ok.status).toBe(202);
    // The same server is an A2A agent: its card is public, its JSON-RPC endpoint wants a key.
    const card = await fetch(`${url}/.well-known/agent-card.json`);
    expect(card.status).toBe(200);
    expect(await card.json()).toMatchObject({ name: "Arbor" });
    expect((await fetch(`${url}/a2a`, { method: "POST", body: "{}" })).status).toBe(401);

    // Keys added or removed while it serves count without a restart (it looks every second).
    const status = (k: string) =>
      fetch(`${url}/v1/tasks/${encodeURIComponent("cld:common.Tenant.beta/plan.Task.none")}`, {
        headers: { authorization: `Bearer ${k}` },
      }).then((r) => r.status);
    const until = async (k: string, wanted: number) => {
      for (let i = 0; i < 50 && (await status(k)) !== wanted; i++) await sleep(100);
      return status(k);
    };
    const later = await arbor(["keys", "add", "--id", "agent_partner", "--tenant", "beta"], {
      ARBOR_API_KEYS_FILE: keysFile,
    });
    const laterKey = keyIn(later.stdout);
    // Known now: let in, and refused by the policy (no task of its tenant that it started).
    expect(await until(laterKey, 403)).toBe(403);
    const kept = ApiKeysSchema.parse(JSON.parse(await readFile(keysFile, "utf8")));
    await writeFile(keysFile, JSON.stringify({ keys: kept.keys.filter((k) => k.id !== "user_cy") }));
    expect(await until(key, 401)).toBe(401); // removed from the file: no longer let in
    expect(await status(laterKey)).toBe(403);
    started.child.kill("SIGTERM");
    expect(await started.exited).toBe(0);
    expect(started.output()).toMatch(/SIGTERM: stopping/);
  }, 60_000);
});

describe("arbor keys list and revoke", () => {
  it("lists without secrets, revokes one key or a principal's keys, and serve stops taking them", async () => {
    const env = arborEnv(join(dir, "data"));
    const ada1 = await addKey(env, "user_ada");
    const ada2 = await addKey(env, "user_ada");
    const bob = await addKey(env, "user_bob");
    const file = JSON.parse(await readFile(join(dir, "data", "api-keys.json"), "utf8")) as {
      keys: { id: string; sha256: string }[];
    };
    const prints = file.keys.map((k) => k.sha256.slice(0, 12));

    const listed = await arborCli(["keys", "list"], env);
    expect(listed.code).toBe(0);
    for (const [i, k] of file.keys.entries()) expect(listed.stdout).toContain(`${prints[i]}  ${k.id}`);
    for (const key of [ada1, ada2, bob]) expect(listed.stdout).not.toContain(key);

    const served = await startServe(env, ["--example", "offsite"]);
    try {
      const status = (key: string) =>
        fetch(
          `${served.url}/v1/tasks/${encodeURIComponent("cld:common.Tenant.acme/common.Conversation.x")}`,
          {
            headers: { authorization: `Bearer ${key}` },
          },
        ).then((r) => r.status);
      const statuses = async () => [await status(ada1), await status(ada2), await status(bob)];
      expect(await statuses()).toEqual([403, 403, 403]); // known keys: the policy answers

      // One key by its fingerprint: ada's other key still works.
      const one = await arborCli(["keys", "revoke", prints[0] as string], env);
      expect(one.code).toBe(0);
      expect(one.stdout).toContain(`Revoked ${prints[0]} user_ada`);
      expect(await eventually(statuses, (s) => s[0] === 401)).toEqual([401, 403, 403]);

      // A principal by id: every key of bob's.
      const all = await arborCli(["keys", "revoke", "user_bob"], env);
      expect(all.code).toBe(0);
      expect(await eventually(statuses, (s) => s[2] === 401)).toEqual([401, 403, 401]);

      // Nothing by that name: says so and changes nothing.
      const none = await arborCli(["keys", "revoke", "user_nobody"], env);
      expect(none.code).not.toBe(0);
      expect(none.stderr).toMatch(
        /no key .* has the id or fingerprint "user_nobody": `arbor keys list` shows them/i,
      );
      expect((await arborCli(["keys", "list"], env)).stdout).toContain(`${prints[1]}  user_ada`);
    } finally {
      await served.stop();
    }
  }, 120_000);
});
