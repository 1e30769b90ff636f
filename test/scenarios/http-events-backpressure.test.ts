import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { feedStreamOf, reconcile } from "../../shared/notify/feed.ts";
import { openFollows } from "../../shared/notify/feed-follow.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";
import { Harness } from "./engine-harness.ts";
import { acme } from "./http-fixture.ts";
import { fanOut, GENERALIST } from "./scenarios.ts";

/**
 * A client that opens an event stream and never reads it holds the server still: the stream reads
 * the feed a page at a time, and only when the client has taken what came before (the response
 * body is pulled; on a socket @hono/node-server waits for `drain`), so what one stalled client
 * costs is bounded by a page, whatever the size of the request. Counted by the feed pages read.
 */
const PAGE = 4;
let feedReads = 0;
function counting(store: StateStore): StateStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== "readStream") return typeof value === "function" ? value.bind(target) : value;
      return (streamId: string, options?: { fromSeq?: number; limit?: number }) => {
        if (streamId.startsWith("feed#") && options?.limit === PAGE) feedReads++;
        return target.readStream(streamId, options);
      };
    },
  });
}

let h: Harness;
beforeAll(async () => {
  const { script } = fanOut(12);
  h = await Harness.create({
    script,
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
});
afterAll(async () => {
  await h?.close();
});

describe("an event stream whose client does not read", () => {
  it("reads no further than a page or two ahead of its client, then sends everything once it reads", async () => {
    const { rootTaskId } = await h.submit("Survey every part");
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const total = (await reconcile(h.engine.deps, rootTaskId)).version;
    expect(total).toBeGreaterThan(PAGE * 8);
    expect(await h.rt.state.streamVersion(feedStreamOf(rootTaskId))).toBe(total);

    // The engine as the app sees it, its state store counting the feed pages read.
    const deps = { ...h.engine.deps, state: counting(h.engine.deps.state) };
    const engine = new Proxy(h.engine, {
      get: (target, prop) => {
        if (prop === "deps") return deps;
        const value = Reflect.get(target, prop, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const app = createServerApp({
      engine,
      keys: new ApiKeys({ keys: [acme.entry] }),
      publicUrl: "http://127.0.0.1",
      events: { pageSize: PAGE },
    });
    feedReads = 0;
    const res = await app.request(`/v1/tasks/${encodeURIComponent(rootTaskId)}/events`, {
      headers: { authorization: `Bearer ${acme.key}`, accept: "text/event-stream" },
    });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read(); // the first chunk, then the client stalls
    for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 10));
    const stalled = feedReads;
    expect(stalled).toBeGreaterThanOrEqual(1); // it did begin
    expect(stalled).toBeLessThanOrEqual(3);
    for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 10));
    expect(feedReads).toBe(stalled); // it does not read on while the client does not

    // The client reads again: everything, once.
    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.at(-1)).toBe(total);
    expect(feedReads).toBeGreaterThan(total / PAGE - 1);
    expect(openFollows()).toBe(0);
  });
});
