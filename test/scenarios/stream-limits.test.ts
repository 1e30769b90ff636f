import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { RateLimiter } from "../../shared/channels/http/rate-limit.ts";
import { openFollows } from "../../shared/notify/feed-follow.ts";
import { until } from "../support/until.ts";
import { Harness } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Event streams a key holds open at once (HTTP `text/event-stream` and A2A streams count together):
 * an open stream costs no request per second, so the request rate does not bound them; past the
 * key's (or the tenant's) number, one more is 429 with Retry-After and nothing is sent or started.
 * A stream that ends, or whose client goes away, gives its place back.
 */
let open = () => {};
const held = new Promise<void>((resolve) => {
  open = resolve;
});
const script: ScriptFunction = async (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  await held; // the request runs until the test ends: its streams stay open
  return { content: "Lisbon." };
};
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const cy = newApiKey({ id: "user_cy", kind: "human", tenant: "acme", roles: [] });
const bea = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });

let h: Harness;
let server: RunningServer;
const clients: AbortController[] = [];
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  await h.engine.registerAssistants("beta", GENERALIST);
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry, cy.entry, bea.entry] }),
    limiter: new RateLimiter({ streams: { perKey: 2, perTenant: 3 } }),
    events: { heartbeatMs: 200, recheckMs: 100 },
  });
});
afterAll(async () => {
  for (const c of clients) c.abort();
  open();
  await server?.close();
  await h?.close();
});

const auth = (key: string) => ({ authorization: `Bearer ${key}` });
async function submit(key: string): Promise<string> {
  const res = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { ...auth(key), "content-type": "application/json" },
    body: JSON.stringify({ text: "Where shall we meet?" }),
  });
  return ((await res.json()) as { rootTaskId: string }).rootTaskId;
}
/** Opens a stream and keeps it open (its first bytes read); returns the response and how to close it. */
async function follow(key: string, root: string) {
  const controller = new AbortController();
  clients.push(controller);
  const res = await fetch(`${server.url}/v1/tasks/${encodeURIComponent(root)}/events`, {
    headers: { ...auth(key), accept: "text/event-stream" },
    signal: controller.signal,
  });
  if (res.status === 200) await res.body?.getReader().read();
  return { res, close: () => controller.abort() };
}
const a2aStream = (key: string) =>
  fetch(`${server.url}/a2a`, {
    method: "POST",
    headers: {
      ...auth(key),
      "content-type": "application/json",
      "A2A-Version": "1.0",
      accept: "text/event-stream",
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "SendStreamingMessage",
      params: {
        message: { messageId: "m-limit", role: "ROLE_USER", parts: [{ text: "Where shall we meet?" }] },
      },
    }),
  });
describe("open event streams per key and per tenant", () => {
  it("a key past its open streams gets 429 on every channel, nothing started; a closed stream gives its place back", async () => {
    const root = await submit(ada.key);
    const one = await follow(ada.key, root);
    const two = await follow(ada.key, root);
    expect([one.res.status, two.res.status]).toEqual([200, 200]);

    const third = await follow(ada.key, root);
    expect(third.res.status).toBe(429);
    expect(third.res.headers.get("retry-after")).toBe("5");
    expect(await third.res.json()).toEqual({
      error: {
        code: "THROTTLED",
        message:
          "Too many event streams open with this API key (at most 2 at once): close one, or try again in 5 s",
        details: { scope: "key" },
      },
    });
    // A2A streams count with them: refused before anything is sent (no new A2A task).
    const rpc = await a2aStream(ada.key);
    expect(rpc.status).toBe(429);
    expect(rpc.headers.get("retry-after")).toBe("5");
    expect(await rpc.json()).toMatchObject({
      jsonrpc: "2.0",
      id: 7,
      error: { message: /Too many event streams/ },
    });
    const list = await fetch(`${server.url}/a2a`, {
      method: "POST",
      headers: { ...auth(ada.key), "content-type": "application/json", "A2A-Version": "1.0" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 8, method: "ListTasks", params: {} }),
    });
    expect(((await list.json()) as { result: { tasks: unknown[] } }).result.tasks).toEqual([]);

    // Another key of the tenant: one more fits the tenant's three, then the tenant is full.
    const cyRoot = await submit(cy.key);
    expect((await follow(cy.key, cyRoot)).res.status).toBe(200);
    const cyRefused = await follow(cy.key, cyRoot);
    expect(cyRefused.res.status).toBe(429);
    expect(await cyRefused.res.json()).toMatchObject({ error: { details: { scope: "tenant" } } });
    // Another tenant is not held up.
    const beaRoot = await submit(bea.key);
    expect((await follow(bea.key, beaRoot)).res.status).toBe(200);

    // A client that goes away gives its place back.
    one.close();
    let again = await follow(ada.key, root);
    await until("a stream to open again", async () => {
      if (again.res.status === 200) return true;
      again = await follow(ada.key, root);
      return again.res.status === 200;
    });
    expect(again.res.status).toBe(200);
  });

  it("refused streams leave nothing running behind them", async () => {
    for (const c of clients) c.abort();
    await until("every follow to close", () => openFollows() === 0);
    expect(openFollows()).toBe(0);
    // Every place is back: the key opens its two again.
    const root = await submit(ada.key);
    const streams = [await follow(ada.key, root), await follow(ada.key, root)];
    expect(streams.map((s) => s.res.status)).toEqual([200, 200]);
  });
});
