import { describe, expect, it } from "vitest";
import { Remote, RemoteError } from "../../../../cli/lib/remote.ts";
import { remoteEvents, remoteLs } from "../../../../cli/lib/remote-commands.ts";

/**
 * The CLI's client of a remote Arbor: what it repeats (reads and the idempotent team PUT, on
 * network errors, 429 after its Retry-After, 502-504) and what it never sends twice (a POST after
 * anything but a 429), with messages that say what to do.
 */
type Reply = Response | Error;
function fake(replies: Reply[]) {
  const calls: { method: string; url: string; auth: string | null }[] = [];
  const waits: number[] = [];
  const fetchImpl = (async (url: string, init: RequestInit) => {
    calls.push({ method: String(init.method), url, auth: new Headers(init.headers).get("authorization") });
    const next = replies.shift();
    if (!next) throw new Error("no more replies");
    if (next instanceof Error) throw next;
    return next;
  }) as unknown as typeof fetch;
  const remote = new Remote(
    { url: "http://arbor.test", key: "arbor_k" },
    { fetch: fetchImpl, sleep: async (ms) => void waits.push(ms) },
  );
  return { remote, calls, waits };
}
const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
const apiError = (status: number, code: string, message: string, headers: Record<string, string> = {}) =>
  json(status, { error: { code, message } }, headers);
const refused = () => Object.assign(new TypeError("fetch failed"), { cause: { code: "ECONNREFUSED" } });

async function failure(p: Promise<unknown>): Promise<RemoteError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(RemoteError);
    return e as RemoteError;
  }
  throw new Error("expected a failure");
}

describe("the remote client", () => {
  it("sends the key, and answers the JSON", async () => {
    const { remote, calls } = fake([json(200, { ok: 1 })]);
    expect(await remote.get("/v1/me")).toEqual({ ok: 1 });
    expect(calls).toEqual([{ method: "GET", url: "http://arbor.test/v1/me", auth: "Bearer arbor_k" }]);
  });

  it("repeats a GET on network errors and 502/503/504 with backoff, and after a 429's Retry-After", async () => {
    const { remote, calls, waits } = fake([
      refused(),
      apiError(503, "UNAVAILABLE", "locked"),
      apiError(429, "THROTTLED", "slow down", { "retry-after": "3" }),
      json(200, { ok: 1 }),
    ]);
    expect(await remote.get("/v1/me")).toEqual({ ok: 1 });
    expect(calls).toHaveLength(4);
    expect(waits).toEqual([500, 1000, 3000]);
  });

  it("gives up on a GET after its attempts, saying what to check", async () => {
    const { remote, calls } = fake([refused(), refused(), refused(), refused()]);
    const error = await failure(remote.get("/v1/me"));
    expect(calls).toHaveLength(4);
    expect(error.status).toBe(0);
    expect(error.message).toBe(
      "Cannot reach Arbor at http://arbor.test (ECONNREFUSED). Is ARBOR_URL right, and the server running?",
    );
  });

  it("never sends a POST again after a failure that may have let it through", async () => {
    for (const reply of [refused(), apiError(503, "UNAVAILABLE", "x"), apiError(500, "INTERNAL", "oops")]) {
      const { remote, calls } = fake([reply, json(202, {})]);
      const error = await failure(remote.post("/v1/messages", { text: "hi" }));
      expect(calls).toHaveLength(1);
      expect(error.message).toMatch(/not sent again/);
    }
  });

  it("repeats a message sent with an idempotency key, with the same key each time", async () => {
    for (const reply of [refused(), apiError(503, "UNAVAILABLE", "x")]) {
      const seen: (string | null)[] = [];
      const replies: Reply[] = [reply, json(202, { rootTaskId: "cld:x" })];
      const fetchImpl = (async (_url: string, init: RequestInit) => {
        seen.push(new Headers(init.headers).get("idempotency-key"));
        const next = replies.shift() as Reply;
        if (next instanceof Error) throw next;
        return next;
      }) as unknown as typeof fetch;
      const remote = new Remote(
        { url: "http://arbor.test", key: "arbor_k" },
        { fetch: fetchImpl, sleep: async () => {} },
      );
      const answer = await remote.post("/v1/messages", { text: "hi" }, { idempotencyKey: "cli-1" });
      expect(answer).toEqual({ rootTaskId: "cld:x" });
      expect(seen).toEqual(["cli-1", "cli-1"]);
    }
  });

  it("sends a POST again after a 429 (refused before it was read), after its Retry-After", async () => {
    const { remote, calls, waits } = fake([
      apiError(429, "THROTTLED", "slow down", { "retry-after": "2" }),
      json(202, { rootTaskId: "cld:x" }),
    ]);
    expect(await remote.post("/v1/messages", { text: "hi" })).toEqual({ rootTaskId: "cld:x" });
    expect(calls.map((c) => c.method)).toEqual(["POST", "POST"]);
    expect(waits).toEqual([2000]);
  });

  it("does not wait longer than it is willing to: a Retry-After past a minute is reported", async () => {
    const { remote, calls } = fake([apiError(429, "THROTTLED", "slow down", { "retry-after": "3600" })]);
    const error = await failure(remote.get("/v1/me"));
    expect(calls).toHaveLength(1);
    expect(error.message).toMatch(/limiting this key's requests \(429\): slow down; try again in 3600 s/);
  });

  it("says what 401, 403, 404 and a 409 mean, with the server's words, and repeats none", async () => {
    const cases: [Response, RegExp][] = [
      [
        apiError(401, "UNAUTHENTICATED", "That API key is not known here."),
        /does not accept ARBOR_KEY \(401\): That API key/,
      ],
      [apiError(403, "FORBIDDEN", "policy says no"), /^Not allowed \(403\): policy says no$/],
      [apiError(404, "NOT_FOUND", "Task x not found"), /^Not found \(404\): Task x not found$/],
      [apiError(409, "CONFLICT", "already answered"), /refused the request \(409\): already answered/],
    ];
    for (const [reply, message] of cases) {
      const { remote, calls } = fake([reply]);
      const error = await failure(remote.get("/v1/x"));
      expect(error.message).toMatch(message);
      expect(calls).toHaveLength(1);
    }
  });

  it("follows no redirect and says where it pointed; refuses an answer that is not JSON", async () => {
    const moved = fake([
      new Response(null, { status: 302, headers: { location: "https://elsewhere.test/" } }),
    ]);
    expect((await failure(moved.remote.get("/v1/me"))).message).toMatch(
      /redirects to https:\/\/elsewhere\.test\//,
    );
    const html = fake([new Response("<html>", { status: 200 })]);
    expect((await failure(html.remote.get("/v1/me"))).message).toMatch(
      /not JSON: is ARBOR_URL the address of an Arbor API/,
    );
  });

  it("refuses JSON that is not the API's answer it asked for, saying so, instead of failing inside the CLI", async () => {
    for (const body of [null, [], { tree: null }, { tree: "x" }, { other: 1 }]) {
      const { remote } = fake([json(200, body)]);
      const error = await failure(remote.get("/v1/tasks/t/tree", { tree: "object" }));
      expect(error.message).toMatch(
        /answered GET \/v1\/tasks\/t\/tree with JSON that is not an Arbor API's answer/,
      );
    }
    const { remote } = fake([json(200, { tree: { status: "done" } })]);
    expect(await remote.get("/v1/tasks/t/tree", { tree: "object" })).toEqual({ tree: { status: "done" } });
  });

  it("says a body that stopped coming stopped, rather than that it is not JSON", async () => {
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"tree": {'));
        controller.error(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
      },
    });
    const { remote } = fake([
      new Response(body, { status: 200, headers: { "content-type": "application/json" } }),
    ]);
    const error = await failure(remote.get("/v1/tasks/t/tree"));
    expect(error.message).toMatch(
      /did not finish its answer to GET \/v1\/tasks\/t\/tree \(no answer within 30 s\)/,
    );
  });

  it("prints a server's error message without its control characters", async () => {
    const { remote } = fake([apiError(403, "FORBIDDEN", "no \u001b]0;title\u0007\u001b[2J\u001b[31mred")]);
    const error = await failure(remote.get("/v1/x"));
    expect(error.message).toMatch(/^Not allowed \(403\): no /);
    const controls = [...error.message].filter((ch) => {
      const c = ch.codePointAt(0) as number;
      return c < 0x20 || (c >= 0x7f && c <= 0x9f);
    });
    expect(controls).toEqual([]);
  });
});

describe("paging a remote Arbor", () => {
  const always = (body: unknown) => {
    let calls = 0;
    const fetchImpl = (async () => {
      if (++calls > 50) throw new Error("it keeps asking for the same page");
      return json(200, body);
    }) as unknown as typeof fetch;
    return new Remote(
      { url: "http://arbor.test", key: "arbor_k" },
      { fetch: fetchImpl, sleep: async () => {} },
    );
  };

  it("stops, saying why, when a server's pages do not move on (the same cursor, the same fromSeq)", async () => {
    const write = () => {};
    const events = await failure(
      remoteEvents(always({ events: [], nextFromSeq: 1 }), "cld:common.Tenant.a/plan.Task.t", write),
    );
    expect(events.message).toMatch(/does not move on/);
    const children = await failure(
      remoteLs(always({ children: [], cursor: "same" }), "cld:common.Tenant.a", false, write),
    );
    expect(children.message).toMatch(/does not move on/);
  });
});
