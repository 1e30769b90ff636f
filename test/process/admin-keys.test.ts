import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addKey,
  arborCli,
  arborEnv,
  keyIn,
  killAll,
  type Served,
  startServe,
} from "../support/arbor-process.ts";
import { fetchApi } from "../support/http.ts";
import { eventually } from "../support/until.ts";

/**
 * The admin key routes (/v1/admin/keys) and the remote `arbor keys` (ARBOR_URL, ARBOR_KEY) against
 * a real `arbor serve` (child processes): an admin of a tenant makes, lists and revokes that
 * tenant's keys; the keys file is rewritten (0600, hashes only) and the server takes it at once;
 * anyone else is refused (403), and errors say what to do next.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let served: Served;
const keys: Record<string, string> = {};

const api = (method: string, path: string, key: string | undefined, body?: unknown) =>
  fetchApi<Record<string, unknown>>(served.url, method, path, key, body);
/** Whether a key gets in: a known key reads a made-up task of its tenant (the policy says 403). */
const knownStatus = async (key: string) =>
  (await api("GET", `/v1/tasks/${encodeURIComponent("cld:common.Tenant.acme/plan.Task.none")}`, key)).status;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-admin-keys-"));
  env = arborEnv(join(dir, "data"));
  keys.root = await addKey(env, "user_root", "acme", ["admin"]);
  keys.bob = await addKey(env, "user_bob", "acme");
  keys.betaRoot = await addKey(env, "user_beta-root", "beta", ["admin"]);
  served = await startServe(env, ["--example", "offsite"]);
}, 120_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("the admin key routes on arbor serve", () => {
  it("an admin makes a key of its tenant (shown once, 201) that works at once; the file keeps its hash, 0600", async () => {
    const made = await api("POST", "/v1/admin/keys", keys.root, { id: "user_cy", roles: ["ops"] });
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({ id: "user_cy", kind: "human", tenant: "acme", roles: ["ops"] });
    const key = made.json.key as string;
    expect(key).toMatch(/^arbor_/);
    expect(await knownStatus(key)).toBe(403); // let in at once: the policy answers
    const file = join(dir, "data", "api-keys.json");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const text = await readFile(file, "utf8");
    expect(text).not.toContain(key);
    expect(text).toContain('"user_cy"');
  });

  it("lists the tenant's keys by fingerprint: never a key or a hash, never another tenant's", async () => {
    const listed = await api("GET", "/v1/admin/keys", keys.root);
    expect(listed.status).toBe(200);
    const ids = (listed.json.keys as { id: string; fingerprint: string }[]).map((k) => k.id);
    expect(ids).toContain("user_root");
    expect(ids).toContain("user_bob");
    expect(ids).not.toContain("user_beta-root");
    const text = JSON.stringify(listed.json);
    expect(text).not.toMatch(/[0-9a-f]{64}/);
    expect(text).not.toContain("sha256");
    for (const k of Object.values(keys)) expect(text).not.toContain(k);
  });

  it("refuses everyone but the tenant's admins (403), another tenant's key-making too, and bad input (400)", async () => {
    expect((await api("GET", "/v1/admin/keys", keys.bob)).status).toBe(403);
    expect((await api("POST", "/v1/admin/keys", keys.bob, { id: "user_mallory" })).status).toBe(403);
    expect((await api("DELETE", "/v1/admin/keys/user_root", keys.bob)).status).toBe(403);
    const elsewhere = await api("POST", "/v1/admin/keys", keys.root, { id: "user_eve", tenant: "beta" });
    expect(elsewhere.status).toBe(403);
    expect((await api("GET", "/v1/admin/keys", undefined)).status).toBe(401);
    const bad = await api("POST", "/v1/admin/keys", keys.root, { id: "eve" });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json)).toMatch(/user_<name> or agent_<name>/);
    expect((await api("POST", "/v1/admin/keys", keys.root, { id: "user_x", extra: 1 })).status).toBe(400);
    // Nothing of that was written.
    const text = await readFile(join(dir, "data", "api-keys.json"), "utf8");
    for (const id of ["user_mallory", "user_eve", '"eve"', "user_x"]) expect(text).not.toContain(id);
  });

  it("revokes by fingerprint or id, and the key stops at once; an unknown one is 404", async () => {
    const made = await api("POST", "/v1/admin/keys", keys.root, { id: "agent_bot" });
    const key = made.json.key as string;
    expect(await knownStatus(key)).toBe(403);
    const gone = await api("DELETE", `/v1/admin/keys/${made.json.fingerprint as string}`, keys.root);
    expect(gone).toMatchObject({ status: 200, json: { revoked: [{ id: "agent_bot", tenant: "acme" }] } });
    expect(await knownStatus(key)).toBe(401);
    expect((await api("DELETE", "/v1/admin/keys/agent_bot", keys.root)).status).toBe(404);
    // Another tenant's key is not found from this one, by id or by fingerprint.
    expect((await api("DELETE", "/v1/admin/keys/user_beta-root", keys.root)).status).toBe(404);
  });
});

describe("arbor keys against a remote Arbor (ARBOR_URL, ARBOR_KEY)", () => {
  const remote = (key: string) => ({
    ...env,
    ARBOR_URL: served.url,
    ARBOR_KEY: key,
    ARBOR_DATA_DIR: join(dir, "other"),
  });

  it("adds (printed once), lists and revokes through the admin routes, with an admin key", async () => {
    const added = await arborCli(
      ["keys", "add", "--id", "user_dee", "--role", "ops"],
      remote(keys.root as string),
    );
    expect(added.code).toBe(0);
    expect(added.stdout).toContain(`to ${served.url}`);
    const key = keyIn(added.stdout);
    expect(await knownStatus(key)).toBe(403);

    const listed = await arborCli(["keys", "list"], remote(keys.root as string));
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/[0-9a-f]{12} {2}user_dee/);
    expect(listed.stdout).not.toContain(key);
    expect(listed.stdout).not.toContain("user_beta-root");

    const revoked = await arborCli(["keys", "revoke", "user_dee"], remote(keys.root as string));
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(/Revoked [0-9a-f]{12} user_dee \(tenant acme\)/);
    expect(
      await eventually(
        () => knownStatus(key),
        (s) => s === 401,
      ),
    ).toBe(401);
  });

  it("says what to do with a key that is not known (401) or not an admin's (403), changing nothing", async () => {
    const unknown = await arborCli(["keys", "list"], remote("arbor_not-a-key-anyone-made-000"));
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/does not know the key in ARBOR_KEY \(401\): check ARBOR_KEY/);
    const notAdmin = await arborCli(["keys", "add", "--id", "user_zed"], remote(keys.bob as string));
    expect(notAdmin.code).not.toBe(0);
    expect(notAdmin.stderr).toMatch(/403.*needs an admin key of that tenant/);
    const noKey = await arborCli(["keys", "list"], { ...env, ARBOR_URL: served.url, ARBOR_KEY: "" });
    expect(noKey.code).not.toBe(0);
    expect(noKey.stderr).toMatch(/ARBOR_URL needs ARBOR_KEY/);
    const text = await readFile(join(dir, "data", "api-keys.json"), "utf8");
    expect(text).not.toContain("user_zed");
  });
});
