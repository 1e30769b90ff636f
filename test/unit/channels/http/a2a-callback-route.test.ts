import { describe, expect, it } from "vitest";
import { a2aCallbackRoutes } from "../../../../shared/channels/http/http-a2a-callbacks.ts";
import type { Engine } from "../../../../shared/engine/engine.ts";

/**
 * `POST /v1/a2a-callbacks/:id` is open to anyone (each call has its own token): what cannot be a
 * push for a call Arbor has out (no token, an id Arbor never makes) is 401 before the body is
 * read or anything is looked up, so a flood of them costs a parse of the headers and no more.
 */
function routes() {
  const calls: unknown[][] = [];
  const engine = {
    receivePush: async (...args: unknown[]) => {
      calls.push(args);
      return "unknown";
    },
  } as unknown as Engine;
  return { app: a2aCallbackRoutes(engine), calls };
}
/** A body that records whether anyone read it. */
function watchedBody() {
  const watch = { read: false };
  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        watch.read = true;
        controller.enqueue(new TextEncoder().encode('{"task":{}}'));
        controller.close();
      },
    },
    { highWaterMark: 0 },
  ); // pulled only when read
  return { body, watch };
}
const post = (app: ReturnType<typeof routes>["app"], path: string, headers: Record<string, string>) => {
  const { body, watch } = watchedBody();
  const res = app.request(`http://arbor.test${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
    duplex: "half",
  } as RequestInit);
  return { res, watch };
};

describe("POST /v1/a2a-callbacks/:id without what a push must carry", () => {
  it("no token: 401, the body not read, nothing looked up", async () => {
    const { app, calls } = routes();
    const { res, watch } = post(app, "/v1/a2a-callbacks/AbCdEfGhIjKlMnOpQrStUvWx", {});
    const r = await res;
    expect(r.status).toBe(401);
    expect(r.headers.get("www-authenticate")).toMatch(/^Bearer /);
    expect(await r.json()).toMatchObject({ error: { code: "UNAUTHENTICATED" } });
    expect(watch.read).toBe(false);
    expect(calls).toEqual([]);
  });

  it("an id Arbor never makes (too long, other characters): the same 401, nothing looked up", async () => {
    const { app, calls } = routes();
    for (const id of ["x".repeat(3000), "a%20b", "..%2F..%2Fetc", "a.b"]) {
      const { res, watch } = post(app, `/v1/a2a-callbacks/${id}`, { authorization: "Bearer t" });
      const r = await res;
      expect(r.status, id.slice(0, 20)).toBe(401);
      expect(watch.read).toBe(false);
    }
    expect(calls).toEqual([]);
  });

  it("a well-formed id with a token goes on to the check of the token", async () => {
    const { app, calls } = routes();
    const r = await post(app, "/v1/a2a-callbacks/AbCdEfGhIjKlMnOpQrStUvWx", { authorization: "Bearer t" })
      .res;
    expect(r.status).toBe(401);
    expect(calls).toEqual([["AbCdEfGhIjKlMnOpQrStUvWx", "t", { task: {} }]]);
  });
});
