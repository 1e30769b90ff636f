import { handle } from "hono/aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withEncodedUrn } from "../../functions/api.ts";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The API function's app as API Gateway's HTTP API feeds it: the path arrives decoded (`rawPath`),
 * so a `?`, `#` or `%` a caller sent encoded inside a segment is a literal one there. Whatever the
 * path, the function must mean what the caller named: never a shorter path (another key, another
 * route) cut off at a decoded `?` or `#`.
 */
const root = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Do any part of any task and report the result" });
  if (isEvaluation(r)) return pass();
  return { content: "answered" };
};

let h: Harness;
let keys: ApiKeys;
let lambda: ReturnType<typeof handle>;
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST });
  keys = new ApiKeys({ keys: [root.entry, bob.entry] });
  lambda = handle(createServerApp({ engine: h.engine, keys, publicUrl: PUBLIC_URL }));
});
afterAll(async () => {
  await h?.close();
});

const send = async (method: string, path: string) => {
  const res = await lambda(withEncodedUrn(apiEvent(method, path, { key: root.key })));
  return { status: res.statusCode, body: res.body };
};

describe("a decoded ? or # in the path", () => {
  it("does not cut a key's name short: DELETE /v1/admin/keys/user_bob%23x revokes nobody", async () => {
    for (const which of ["user_bob%23x", "user_bob%3Fx", "user_bob%3F", "user_bob%23"]) {
      const res = await send("DELETE", `/v1/admin/keys/${which}`);
      expect([which, res.status]).toEqual([which, 404]);
      expect(res.body).toContain(decodeURIComponent(which));
    }
    expect((await keys.list("acme")).map((k) => k.id).sort()).toEqual(["user_bob", "user_root"]);
  });

  it("does not turn a URN's tail into a query, nor a bare % into an error", async () => {
    const urn = encodeURIComponent("cld:common.Tenant.acme/plan.Task.x");
    for (const tail of ["%3FfromSeq%3D2", "%23frag", "%25", "%2541"]) {
      const res = await send("GET", `/v1/tasks/${urn}/events${tail}`);
      expect([tail, res.status]).toEqual([tail, 404]);
      expect(res.body).toContain("NOT_FOUND");
    }
    // And the real query string still counts.
    expect((await send("GET", `/v1/tasks/${urn}/events?fromSeq=x`)).status).toBe(400);
  });
});

describe("a decoded . or .. segment in the path", () => {
  it("is no step up to another route: a URN with ../../admin/keys/user_bob in it revokes nobody", async () => {
    for (const [method, path] of [
      ["DELETE", `/v1/tasks/${encodeURIComponent("cld:common.Tenant.acme/../../admin/keys/user_bob")}`],
      [
        "DELETE",
        `/v1/tasks/${encodeURIComponent("cld:common.Tenant.acme/plan.Task.t/../../../admin/keys/user_bob")}`,
      ],
      ["DELETE", "/v1/tasks/%2E%2E/admin/keys/user_bob"],
      ["DELETE", "/v1/admin/keys/user_root/%2E%2E/user_bob"],
      ["GET", "/v1/tasks/%2E%2E/%2E%2E/admin/keys"],
    ] as const) {
      const res = await send(method, path);
      expect([method, path, res.status]).toEqual([method, path, 404]);
    }
    expect((await keys.list("acme")).map((k) => k.id).sort()).toEqual(["user_bob", "user_root"]);
  });
});
