import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp, type RunningServer, startServer } from "../../shared/channels/http/http-server.ts";
import { RateLimiter } from "../../shared/channels/http/rate-limit.ts";
import { Harness } from "./engine-harness.ts";
import { acme } from "./http-fixture.ts";
import { GENERALIST } from "./scenarios.ts";

/**
 * `arbor serve` against clients that cost it without ever being let in: a flood of made-up API
 * keys (429 per client address after a while, before any key is looked up), connections that send
 * no headers (closed after the headers' timeout), and more connections than the server holds
 * (past the cap, closed at once). The real server; small limits so the test is quick.
 */
let h: Harness;
let server: RunningServer;
let lookups = 0;
let now = 0;

beforeAll(async () => {
  h = await Harness.create({ script: () => ({ content: "done" }), assistants: GENERALIST });
  /** The keys file, counting every lookup. */
  class CountedKeys extends ApiKeys {
    override authenticate(header: string | undefined | null) {
      lookups++;
      return super.authenticate(header);
    }
  }
  const app = createServerApp({
    engine: h.engine,
    keys: new CountedKeys({ keys: [acme.entry] }),
    // This test's clients are on loopback, which is not counted by default (a local proxy's address).
    limiter: new RateLimiter({ unknownKeys: { burst: 5, perSecond: 1, countLoopback: true } }, () => now),
    publicUrl: "http://127.0.0.1",
  });
  server = await startServer(app, {
    port: 0,
    host: "127.0.0.1",
    limits: { maxConnections: 8, headersTimeoutMs: 1_000 },
  });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const get = (key: string) =>
  fetch(`${server.url}/v1/tasks/x`, { headers: { authorization: `Bearer ${key}` } }).then(async (r) => ({
    status: r.status,
    retryAfter: r.headers.get("retry-after"),
    body: await r.text(),
  }));

describe("arbor serve under clients that are never let in", () => {
  it("a flood of unknown keys from one address gets 429 after its burst, with no key looked up, until it waits", async () => {
    // By default, loopback is not counted: a proxy on the same machine would lock everyone out.
    const uncounted = new RateLimiter({ unknownKeys: { burst: 1, perSecond: 0.001 } });
    for (let i = 0; i < 5; i++) uncounted.unknownKey("127.0.0.1");
    expect(uncounted.unknownKeysFrom("127.0.0.1")).toBeUndefined();
    for (let i = 0; i < 5; i++) uncounted.unknownKey("203.0.113.9");
    expect(uncounted.unknownKeysFrom("203.0.113.9")).toMatchObject({ scope: "source" });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await get(`arbor_made_up_${i}`)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    const before = lookups;
    const refused = await get("arbor_made_up_6");
    expect(refused.status).toBe(429);
    expect(refused.retryAfter).toBe("1");
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: "THROTTLED" } });
    expect(refused.body).toMatch(/unknown API keys from this address/);
    for (let i = 0; i < 20; i++) expect((await get(`arbor_more_${i}`)).status).toBe(429);
    expect(lookups).toBe(before); // no store read for any of them
    // The A2A endpoint counts the same address with the same limiter.
    const a2a = await fetch(`${server.url}/a2a`, {
      method: "POST",
      headers: { authorization: "Bearer arbor_made_up_a2a", "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "t" } }),
    });
    expect(a2a.status).toBe(429);
    expect(await a2a.text()).toMatch(/unknown API keys from this address/);
    expect(lookups).toBe(before);
    // Time passes (one unknown key a second): a key is looked at again.
    now += 2_000;
    expect((await get(acme.key)).status).toBe(404); // the real key: its own answer (no such task)
  });

  it("closes a connection that sends no headers within the timeout (408), and holds no more connections than its cap", async () => {
    const silent = connect(Number(new URL(server.url).port), "127.0.0.1");
    const t0 = Date.now();
    const answer = await new Promise<string>((resolve) => {
      let got = "";
      silent.on("data", (d) => {
        got += String(d);
      });
      silent.on("close", () => resolve(got));
    });
    expect(answer).toMatch(/^HTTP\/1.1 408/);
    expect(Date.now() - t0).toBeLessThan(10_000);

    // Twelve at once: within a moment (well before the headers' timeout) those past the cap are closed
    // (the cap counts every open connection: this process's idle keep-alive ones too).
    const port = Number(new URL(server.url).port);
    const held: Socket[] = [];
    const closed = new Set<number>();
    await Promise.all(
      Array.from({ length: 12 }, (_, i) => {
        const s = connect(port, "127.0.0.1");
        held.push(s);
        s.on("close", () => closed.add(i));
        return new Promise((resolve) => s.once("connect", resolve));
      }),
    );
    await new Promise((r) => setTimeout(r, 300));
    expect(12 - closed.size).toBeLessThanOrEqual(8);
    expect(closed.size).toBeGreaterThanOrEqual(4);
    expect(closed.size).toBeLessThan(12);
    for (const s of held) s.destroy();
  });
});
