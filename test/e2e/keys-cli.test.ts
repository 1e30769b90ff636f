import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, startServe } from "../support/arbor-process.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor keys list` and `arbor keys revoke` as a person runs them (real child processes): the list
 * names each key by fingerprint and principal and never shows a key; a revoke by fingerprint takes
 * one key, by id all of a principal's; a running `arbor serve` stops taking a revoked key.
 */
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-keys-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
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
