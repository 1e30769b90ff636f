import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keysCommand } from "../../cli/lib/keys.ts";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { arborEnv } from "../support/arbor-process.ts";
import { fetchApi } from "../support/http.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The admin routes as their worst users use them, over real HTTP: what an admin asks for that the
 * policy would never honour is refused when it is made, not discovered later, and changes nothing.
 */
const root = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const other = newApiKey({ id: "user_other", kind: "human", tenant: "acme", roles: ["admin"] });
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Do any part of any task and report the result" });
  if (isEvaluation(r)) return pass();
  return { content: "answered" };
};

let h: Harness;
let server: RunningServer;
let keys: ApiKeys;
let dir: string;
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST });
  keys = new ApiKeys({ keys: [root.entry, other.entry] });
  server = await serveHttp({ engine: h.engine, keys });
  dir = await mkdtemp(join(tmpdir(), "arbor-admin-hostile-"));
});
afterAll(async () => {
  await server?.close();
  await h?.close();
  await rm(dir, { recursive: true, force: true });
});

const call = (method: string, path: string, key: string, body?: unknown) =>
  fetchApi<Record<string, unknown>>(server.url, method, path, key, body);

describe("an agent's key with the admin role", () => {
  it("is refused by the admin route (400, saying why and what to do), and nothing is kept", async () => {
    for (const body of [
      { id: "agent_bot", roles: ["admin"] },
      { id: "agent_bot", kind: "agent", roles: ["ops", "admin"] },
    ]) {
      const res = await call("POST", "/v1/admin/keys", root.key, body);
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.json)).toMatch(/agent's key cannot have the admin role.*user_<name>/);
    }
    expect((await keys.list("acme")).map((k) => k.id).sort()).toEqual(["user_other", "user_root"]);
    // An agent's key without it, and a person's with it, are made as before.
    expect((await call("POST", "/v1/admin/keys", root.key, { id: "agent_bot", roles: ["ops"] })).status).toBe(
      201,
    );
    expect((await call("POST", "/v1/admin/keys", root.key, { id: "user_cy", roles: ["admin"] })).status).toBe(
      201,
    );
  });

  it("is refused by arbor keys add too, before the keys file is written", async () => {
    const env = arborEnv(join(dir, "data"));
    const lines: string[] = [];
    const add = (id: string, roles: string[]) =>
      keysCommand(
        "add",
        undefined,
        { id, kind: undefined, tenant: "acme", roles },
        (l) => lines.push(l),
        env,
      );
    await add("user_ada", []);
    await expect(add("agent_bot", ["admin"])).rejects.toThrow(/agent's key cannot have the admin role/);
    const file = await readFile(join(dir, "data", "api-keys.json"), "utf8");
    expect(file).toContain("user_ada");
    expect(file).not.toContain("agent_bot");
  });
});

describe("two admins applying different team files at once", () => {
  const team = (...ids: string[]) => ({
    assistants: ids.map((id) => ({ name: `N ${id}`, id, purpose: `Do the ${id} part of any task` })),
  });
  const active = async () => (await h.engine.team("acme")).map((a) => a.meta.id.split(".").at(-1)).sort();
  const admin = (id: string) => ({
    actor: { id, kind: "human" as const },
    caller: { tenant: "acme", roles: ["admin"] },
  });

  it("leave the team one of the two files, never a mix of both; the other is told to apply again (409)", async () => {
    const [a, b] = await Promise.allSettled([
      h.engine.applyTeam("acme", team("alpha", "beta"), { asker: admin("user_root") }),
      h.engine.applyTeam("acme", team("gamma", "delta"), { asker: admin("user_other") }),
    ]);
    expect([a.status, b.status].sort()).toEqual(["fulfilled", "rejected"]);
    const lost = (a.status === "rejected" ? a : b) as PromiseRejectedResult;
    expect(lost.reason).toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/another.*again/i),
    });
    expect([
      ["alpha", "beta"],
      ["delta", "gamma"],
    ]).toContainEqual(await active());
    // Once the first is done, the other applies as usual, over HTTP too.
    const again = a.status === "rejected" ? ["alpha", "beta"] : ["gamma", "delta"];
    expect((await call("PUT", "/v1/admin/team", root.key, team(...again))).status).toBe(200);
    expect(await active()).toEqual([...again].sort());
  });
});
