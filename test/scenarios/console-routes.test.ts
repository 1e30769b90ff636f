import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { CONTENT_SECURITY_POLICY } from "../../shared/channels/console/console-app.ts";
import { SESSION_TTL_MS } from "../../shared/channels/console/sessions.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { RateLimiter } from "../../shared/channels/http/rate-limit.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The console's routes as a hostile browser (or a script posing as one) meets them, in this
 * process (app.fetch): the sign-in and its cookie, the session standing in for the key on the HTTP
 * API and only with its CSRF token for a change, other tenants' URNs, made-up and replayed
 * cookies, bad queries, oversized forms, revoked keys, expiry, and markup in what a model says.
 * The same pages in a real browser: test/process/console-browser.test.ts.
 */
const BASE = "https://arbor.example";
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const bot = newApiKey({ id: "agent_bot", kind: "agent", tenant: "acme", roles: [] });
const eve = newApiKey({ id: "user_eve", kind: "human", tenant: "evil", roles: ["admin"] });
const HOSTILE = `<script>alert(1)</script><img src=x onerror="alert(2)">`;
/** A plan's name that would close the page's data block, were the plan put in it as it is. */
const PLAN_NAME = `</script><script>alert(3)</script>`;

let h: Harness;
let keys: ApiKeys;
let app: Hono;

beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r))
        return JSON.stringify(r.messages).includes("hostile plan")
          ? planOf({ name: PLAN_NAME, purpose: HOSTILE, subtasks: [{ name: "Then", purpose: "</script>" }] })
          : planOf({ name: "Answer", purpose: "Answer the question" });
      if (isEvaluation(r)) return pass();
      return { content: `The model says ${HOSTILE}` };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  keys = new ApiKeys({ keys: [ada.entry, bob.entry, bot.entry, eve.entry] });
  app = createServerApp({ engine: h.engine, keys, publicUrl: BASE });
});
afterAll(async () => {
  await h.close();
});

const call = (path: string, init: RequestInit = {}) => app.fetch(new Request(`${BASE}${path}`, init));

function form(fields: Record<string, string>, headers: Record<string, string> = {}): RequestInit {
  return {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString(),
  };
}

/** Signs in with `key`: the session's cookie (name=value) and its CSRF token (from a page). */
async function signIn(key: string): Promise<{ cookie: string; csrf: string }> {
  const res = await call("/console/login", form({ key, next: "/console" }));
  expect(res.status).toBe(303);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const page = await (await call("/console", { headers: { cookie } })).text();
  const csrf = /name="arbor-csrf" content="([^"]+)"/.exec(page)?.[1] ?? "";
  expect(csrf).not.toBe("");
  return { cookie, csrf };
}

const json = (headers: Record<string, string>, body: unknown): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body),
});

describe("signing in", () => {
  it("exchanges a key for an HttpOnly, Secure, SameSite=Strict session cookie and goes on to next", async () => {
    const res = await call("/console/login", form({ key: ada.key, next: "/console/questions" }));
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/questions");
    const cookie = res.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/^__Host-arbor_session=[A-Za-z0-9_-]{43};/);
    for (const part of [
      "HttpOnly",
      "Secure",
      "SameSite=Strict",
      "Path=/",
      `Max-Age=${SESSION_TTL_MS / 1000}`,
    ])
      expect(cookie).toContain(part);
    // The key is in no header of the answer, and the session token is not the key.
    expect(JSON.stringify([...res.headers])).not.toContain(ada.key);
  });

  it("refuses an unknown key, an agent's key and a sign-in sent by another site, setting no cookie", async () => {
    const cases: [RequestInit, number, RegExp][] = [
      [form({ key: "arbor_not-a-key-at-all-000000000" }), 401, /not known here/],
      [form({ key: "" }), 401, /not known here/],
      [form({ key: bot.key }), 403, /a remote agent&#39;s \(agent_bot\)/],
      [form({ key: ada.key }, { "sec-fetch-site": "cross-site" }), 403, /another site/],
    ];
    for (const [init, status, says] of cases) {
      const res = await call("/console/login", init);
      expect(res.status).toBe(status);
      expect(res.headers.get("set-cookie")).toBeNull();
      expect(await res.text()).toMatch(says);
    }
  });

  it("goes on only to the console's own pages, whatever next says", async () => {
    for (const next of [
      "//evil.example/x",
      "https://evil.example",
      "/console/../v1/me",
      "/console/./x",
      "/consolex",
      "/v1/me",
      "/console\\..\\v1",
      " /console",
    ]) {
      const res = await call("/console/login", form({ key: ada.key, next }));
      expect(res.headers.get("location"), next).toBe("/console");
    }
  });

  it("refuses a form larger than the console takes, reading no key from it", async () => {
    const res = await call("/console/login", form({ key: ada.key, pad: "x".repeat(20_000) }));
    expect(res.status).toBe(413);
    expect(res.headers.get("set-cookie")).toBeNull();
  });

  it("slows down a source that keeps sending unknown keys", async () => {
    const limited = createServerApp({
      engine: h.engine,
      keys,
      publicUrl: BASE,
      limiter: new RateLimiter({ unknownKeys: { burst: 2, perSecond: 0.01, countLoopback: true } }),
    });
    const attempt = () =>
      limited.fetch(
        new Request(`${BASE}/console/login`, form({ key: "arbor_guess-guess-guess-guess-0000" })),
        {
          incoming: { socket: { remoteAddress: "203.0.113.9" } },
        },
      );
    expect((await attempt()).status).toBe(401);
    expect((await attempt()).status).toBe(401);
    const third = await attempt();
    expect(third.status).toBe(429);
    expect(third.headers.get("retry-after")).toMatch(/^\d+$/);
  });
});

describe("a session", () => {
  it("stands for its key on the HTTP API: reads freely, changes only with its CSRF token from this site", async () => {
    const { cookie, csrf } = await signIn(ada.key);
    const me = await call("/v1/me", { headers: { cookie } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ actor: { id: "user_ada" }, tenant: "acme" });
    const message = { text: "Plan the offsite" };
    for (const headers of [
      { cookie },
      { cookie, "x-arbor-csrf": "wrong" },
      { cookie, "x-arbor-csrf": `${csrf}x` },
      { cookie, "x-arbor-csrf": csrf, "sec-fetch-site": "cross-site" },
      { cookie, "x-arbor-csrf": csrf, "sec-fetch-site": "same-site" },
    ]) {
      const res = await call("/v1/messages", json(headers, message));
      expect(res.status, JSON.stringify(headers)).toBe(403);
    }
    const sent = await call(
      "/v1/messages",
      json({ cookie, "x-arbor-csrf": csrf, "sec-fetch-site": "same-origin" }, message),
    );
    expect(sent.status).toBe(202);
    // A key in the header wins over a cookie, and needs no CSRF token.
    const withKey = await call(
      "/v1/messages",
      json(
        { cookie: "__Host-arbor_session=garbage", authorization: `Bearer ${bob.key}` },
        { text: "Bob's own" },
      ),
    );
    expect(withKey.status).toBe(202);
  });

  it("is unknown when made up, and ends at sign-out: the old cookie replayed signs nobody in", async () => {
    const madeUp = "__Host-arbor_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    expect((await call("/console", { headers: { cookie: madeUp } })).status).toBe(303);
    expect((await call("/v1/me", { headers: { cookie: madeUp } })).status).toBe(401);

    const { cookie, csrf } = await signIn(bob.key);
    const noToken = await call("/console/logout", form({}, { cookie }));
    expect(noToken.status).toBe(403);
    const out = await call("/console/logout", form({ csrf }, { cookie }));
    expect(out.status).toBe(303);
    expect(out.headers.get("set-cookie")).toMatch(/__Host-arbor_session=;.*Max-Age=0/);
    const replayed = await call("/console", { headers: { cookie } });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get("location")).toBe("/console/login?next=%2Fconsole");
    expect((await call("/v1/me", { headers: { cookie } })).status).toBe(401);
  });

  it("ends when its key is revoked, and after its hours", async () => {
    const revocable = newApiKey({ id: "user_cy", kind: "human", tenant: "acme", roles: [] });
    await keys.add(revocable.entry);
    const { cookie } = await signIn(revocable.key);
    expect((await call("/console", { headers: { cookie } })).status).toBe(200);
    await keys.revoke("user_cy");
    expect((await call("/console", { headers: { cookie } })).status).toBe(303);

    const later = await signIn(bob.key);
    h.advance(SESSION_TTL_MS - 1000);
    expect((await call("/console", { headers: { cookie: later.cookie } })).status).toBe(200);
    h.advance(1000);
    expect((await call("/console", { headers: { cookie: later.cookie } })).status).toBe(303);
  });
});

describe("the pages", () => {
  it("send a strict CSP, forbid framing and caching, and load only their own two files", async () => {
    const { cookie } = await signIn(ada.key);
    const res = await call("/console", { headers: { cookie } });
    expect(res.headers.get("content-security-policy")).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).toContain("script-src 'self'");
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const page = await res.text();
    expect([...page.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1])).toEqual([
      "/console/assets/console.js",
    ]);
    expect(page).not.toMatch(/<script>(?!<\/script>)|\son[a-z]+=/i);
    const js = await call("/console/assets/console.js");
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
    const etag = js.headers.get("etag") ?? "";
    expect((await call("/console/assets/console.js", { headers: { "if-none-match": etag } })).status).toBe(
      304,
    );
    expect((await call("/console/assets/..%2f..%2fpackage.json")).status).toBe(404);
  });

  it("show what a model said as text, in the list, the tree and the timeline", async () => {
    const { cookie, csrf } = await signIn(ada.key);
    const sent = await call(
      "/v1/messages",
      json({ cookie, "x-arbor-csrf": csrf }, { text: `Say ${HOSTILE}` }),
    );
    const { rootTaskId } = (await sent.json()) as { rootTaskId: string };
    await h.idle();
    for (const path of [
      "/console?scope=all",
      `/console/requests/${encodeURIComponent(rootTaskId)}`,
      `/console/tasks/${encodeURIComponent(rootTaskId)}`,
    ]) {
      const page = await (await call(path, { headers: { cookie } })).text();
      expect(page, path).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
      expect(page, path).not.toContain("<script>alert(1)");
      expect(page, path).not.toContain("<img src=x");
    }
  });

  it("hold a plan to approve in a data block no text in it can close", async () => {
    const { cookie, csrf } = await signIn(ada.key);
    const sent = await call(
      "/v1/messages",
      json({ cookie, "x-arbor-csrf": csrf }, { text: "a hostile plan", mode: "lazy" }),
    );
    const { rootTaskId } = (await sent.json()) as { rootTaskId: string };
    await h.idle();
    const page = await (
      await call(`/console/requests/${encodeURIComponent(rootTaskId)}`, { headers: { cookie } })
    ).text();
    const block = /<script type="application\/json" id="[^"]+">([\s\S]*?)<\/script>/.exec(page);
    expect(block, "the plan's data block").not.toBeNull();
    // The block is JSON, whole: the plan's own "</script>" is in it as \u003c/script>.
    expect(JSON.parse(block?.[1] as string)).toMatchObject({ name: PLAN_NAME, purpose: HOSTILE });
    expect(page).not.toContain("<script>alert(3)");
    expect(page.match(/<script/g)).toHaveLength(2); // the page's own script, and the data block
  });

  it("answer another tenant's URNs, and any URN that is not one, with not found", async () => {
    const { cookie, csrf } = await signIn(ada.key);
    const sent = await call(
      "/v1/messages",
      json({ cookie, "x-arbor-csrf": csrf }, { text: "Plan the offsite" }),
    );
    const { rootTaskId } = (await sent.json()) as { rootTaskId: string };
    const theirs = await signIn(eve.key);
    const forged = rootTaskId.replace("Tenant.acme", "Tenant.evil");
    for (const urn of [rootTaskId, forged, "not-a-urn", `${rootTaskId}/../..`]) {
      for (const page of ["requests", "tasks", "questions"]) {
        const res = await call(`/console/${page}/${encodeURIComponent(urn)}`, {
          headers: { cookie: theirs.cookie },
        });
        expect(res.status, `${page} ${urn}`).toBe(404);
        expect(await res.text()).not.toContain("Plan the offsite");
      }
    }
    // A person who is not its owner, in the same tenant: the policy says no.
    const bobs = await signIn(bob.key);
    const refused = await call(`/console/requests/${encodeURIComponent(rootTaskId)}`, {
      headers: { cookie: bobs.cookie },
    });
    expect(refused.status).toBe(403);
    expect(await refused.text()).not.toContain("Plan the offsite");
  });

  it("keep the admins' pages to admins, and list only what the policy lets a person read", async () => {
    const { cookie } = await signIn(bob.key);
    for (const page of ["team", "keys", "deliveries", "policy"])
      expect((await call(`/console/admin/${page}`, { headers: { cookie } })).status, page).toBe(403);
    // The tenant's list is an admin's: anyone else is refused it, before a row is read.
    const all = await call("/console?scope=all", { headers: { cookie } });
    expect(all.status).toBe(403);
    expect(await all.text()).not.toContain("Plan the offsite"); // ada's, not bob's
    const mine = await (await call("/console", { headers: { cookie } })).text();
    expect(mine).toContain("Bob&#39;s own");
    expect(mine).not.toContain("Plan the offsite");
    const admin = await signIn(ada.key);
    for (const page of ["team", "keys", "deliveries", "policy"])
      expect((await call(`/console/admin/${page}`, { headers: { cookie: admin.cookie } })).status, page).toBe(
        200,
      );
    const keysPage = await (await call("/console/admin/keys", { headers: { cookie: admin.cookie } })).text();
    expect(keysPage).toContain(ada.entry.sha256.slice(0, 12));
    expect(keysPage).not.toContain(ada.key);
  });

  it("refuse a query that is not theirs, saying what is wrong", async () => {
    const { cookie } = await signIn(ada.key);
    for (const q of ["?state=bogus", "?scope=everyone", `?cursor=${"x".repeat(3000)}`, "?extra=1"]) {
      const res = await call(`/console${q}`, { headers: { cookie } });
      expect(res.status, q).toBe(400);
      expect(await res.text()).toMatch(/query is not valid/);
    }
    expect((await call("/console/nowhere", { headers: { cookie } })).status).toBe(404);
  });
});
