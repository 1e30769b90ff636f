import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { SUB_KIND } from "../../shared/notify/subscriptions.ts";
import { collectPages } from "../../shared/ports/state-store.ts";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { fetchApi } from "../support/http.ts";
import { Harness } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { type Receiver, startReceiver, until, verifyCallback } from "./notify-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * HTTP callbacks (`callbackUrl` on POST /v1/messages) end to end: the real server, a real
 * receiver on loopback (the operator's development switch on), signed callbacks verified by a
 * receiver written from the README's recipe, the signing secret's route and its rotation, and
 * URLs refused before anything is written.
 */
const ANSWER = "The offsite is in Lisbon, 14-15 May.";
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: ANSWER };
};
const admin = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
/** Another key of acme: a remote agent's, with no role. */
const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: [] });

/**
 * A receiver's check with the Standard Webhooks library (not Arbor's code): the payload, or the
 * error. The library checks the timestamp against its own clock (Date.now, within 5 minutes): it
 * is set to Arbor's for the call, the harness's clock being pinned (as nowSeconds does below).
 */
function standardVerify(secret: string, r: { headers: Record<string, unknown>; body: string }) {
  const headers = Object.fromEntries(
    ["webhook-id", "webhook-timestamp", "webhook-signature"].map((k) => [k, String(r.headers[k])]),
  );
  const realNow = Date.now;
  Date.now = () => h.now;
  try {
    return {
      ok: true as const,
      payload: new Webhook(secret).verify(r.body, headers) as Record<string, unknown>,
    };
  } catch (e) {
    return { ok: false as const, error: e };
  } finally {
    Date.now = realNow;
  }
}

let h: Harness;
let server: RunningServer;
let notify: LocalNotify;
let receiver: Receiver;

beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  await h.engine.registerAssistants("beta", GENERALIST);
  notify = startLocalNotify(h.engine, { notify: { allowLoopbackHttp: true }, worker: { tickMs: 60_000 } });
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, admin.entry, partner.entry] }),
    notify: notify.service,
  });
  receiver = await startReceiver();
});
afterAll(async () => {
  await server?.close();
  await notify?.stop();
  await receiver?.close();
  await h?.close();
});

async function api(method: string, path: string, key: string, body?: unknown) {
  const { status, json } = await fetchApi<Record<string, unknown>>(server.url, method, path, key, body);
  return { status, body: json };
}

const nowSeconds = () => Math.floor(h.now / 1000); // the receiver's clock agrees with Arbor's here

describe("signed HTTP callbacks", () => {
  it("tells the callbackUrl how the request moves, signed, each event once by id, ending with the answer", async () => {
    const { body: secretBody } = await api("GET", "/v1/callbacks/secret", acme.key);
    const secret = String(secretBody.secret);
    expect(secret).toMatch(/^whsec_/);
    const sent = await api("POST", "/v1/messages", acme.key, {
      text: "Where is the offsite?",
      callbackUrl: `${receiver.url}/hooks/arbor`,
    });
    expect(sent.status).toBe(202);
    const taskId = String(sent.body.rootTaskId);
    const mine = () => receiver.got.filter((r) => JSON.parse(r.body).taskId === taskId);
    await until("the completed callback", () => mine().some((r) => JSON.parse(r.body).state === "completed"));

    const seen = new Set<string>();
    for (const r of mine()) {
      expect(r.path).toBe("/hooks/arbor");
      expect(r.headers["content-type"]).toBe("application/json");
      const verified = verifyCallback(
        secret,
        r.headers["arbor-signature"] as string,
        r.body,
        nowSeconds(),
        seen,
      );
      expect(verified).toMatchObject({ ok: true, duplicate: false });
      expect(r.headers["arbor-delivery-id"]).toBe(JSON.parse(r.body).id);
      // The Standard Webhooks library verifies the same delivery, and the id it is sent with.
      expect(standardVerify(secret, r)).toMatchObject({ ok: true, payload: JSON.parse(r.body) });
      expect(r.headers["webhook-id"]).toBe(JSON.parse(r.body).id);
    }
    const last = JSON.parse((mine().at(-1) as { body: string }).body);
    expect(last).toMatchObject({ type: "task.completed", taskId, state: "completed", answer: ANSWER });
    expect(typeof last.at).toBe("string");
  });

  it("a wrong signature, a wrong secret or an old timestamp fails the README's receiver", async () => {
    const { body } = await api("GET", "/v1/callbacks/secret", acme.key);
    const secret = String(body.secret);
    const r = receiver.got.find((x) => x.headers["arbor-signature"]) as (typeof receiver.got)[number];
    const header = r.headers["arbor-signature"] as string;
    const t = Number(/t=(\d+)/.exec(header)?.[1]);
    expect(verifyCallback(secret, header, r.body, nowSeconds(), new Set())).toMatchObject({ ok: true });
    expect(verifyCallback(secret, header, `${r.body} `, nowSeconds(), new Set())).toEqual({
      ok: false,
      why: "signature mismatch",
    });
    expect(verifyCallback("whsec_other", header, r.body, nowSeconds(), new Set())).toMatchObject({
      ok: false,
    });
    const forged = header.replace(/v1=([0-9a-f])/, (_, c: string) => `v1=${c === "0" ? "1" : "0"}`);
    expect(verifyCallback(secret, forged, r.body, nowSeconds(), new Set())).toMatchObject({ ok: false });
    expect(verifyCallback(secret, header, r.body, t + 301, new Set())).toEqual({
      ok: false,
      why: "too old (or from the future)",
    });
  });

  it("each key has its own secret, shown to it alone: another key of the tenant cannot verify (or forge) its callbacks", async () => {
    const mine = await api("GET", "/v1/callbacks/secret", acme.key);
    expect(mine.status).toBe(200);
    expect(mine.body).toMatchObject({
      signature: { headers: ["webhook-id", "webhook-timestamp", "webhook-signature"] },
    });
    const theirs = await api("GET", "/v1/callbacks/secret", partner.key);
    expect(theirs.status).toBe(200);
    expect(theirs.body.secret).not.toBe(mine.body.secret);
    // The tenant's secret (callbacks recorded before secrets were per key) is for admins only.
    expect((await api("GET", "/v1/admin/callbacks/secret", partner.key)).status).toBe(403);
    expect((await api("GET", "/v1/admin/callbacks/secret", acme.key)).status).toBe(403);
    const tenantSecret = await api("GET", "/v1/admin/callbacks/secret", admin.key);
    expect(tenantSecret.status).toBe(200);
    expect([mine.body.secret, theirs.body.secret]).not.toContain(tenantSecret.body.secret);
    // Nor may another key rotate it, or a key rotate another's through the admin route.
    expect((await api("POST", "/v1/admin/callbacks/secret/rotate", partner.key, {})).status).toBe(403);
    expect(
      (await api("POST", "/v1/admin/callbacks/secret/rotate", partner.key, { principal: "user_ada" })).status,
    ).toBe(403);
    // Acme's callbacks verify with acme's secret only.
    const r = receiver.got.find((x) => x.headers["webhook-signature"]) as (typeof receiver.got)[number];
    expect(standardVerify(String(mine.body.secret), r)).toMatchObject({
      ok: true,
      payload: JSON.parse(r.body),
    });
    for (const other of [theirs.body.secret, tenantSecret.body.secret]) {
      const v = standardVerify(String(other), r);
      expect(v.ok).toBe(false);
      expect((v as { error: unknown }).error).toBeInstanceOf(WebhookVerificationError);
      expect(
        verifyCallback(
          String(other),
          r.headers["arbor-signature"] as string,
          r.body,
          nowSeconds(),
          new Set(),
        ),
      ).toMatchObject({ ok: false });
    }
  });

  it("rotation: a key rotates its own, admins any key's; the next callbacks carry the new signature and, for a day, the old one", async () => {
    const before = String((await api("GET", "/v1/callbacks/secret", acme.key)).body.secret);
    const own = await api("POST", "/v1/callbacks/secret/rotate", acme.key);
    expect(own.status).toBe(200);
    const middle = String(own.body.secret);
    expect(middle).not.toBe(before);
    const rotated = await api("POST", "/v1/admin/callbacks/secret/rotate", admin.key, {
      principal: "user_ada",
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ principal: "user_ada" });
    const after = String(rotated.body.secret);
    expect(after).not.toBe(middle);
    const shown = await api("GET", "/v1/callbacks/secret", acme.key);
    expect(shown.body).toMatchObject({ secret: after });
    expect(typeof shown.body.previousValidUntil).toBe("string");
    expect(JSON.stringify(shown.body)).not.toContain(middle); // the old secret is never shown again
    const count = receiver.got.length;
    const sent = await api("POST", "/v1/messages", acme.key, {
      text: "And when?",
      callbackUrl: `${receiver.url}/hooks/arbor`,
    });
    await until("a callback after the rotation", () =>
      receiver.got.slice(count).some((r) => JSON.parse(r.body).taskId === sent.body.rootTaskId),
    );
    const r = receiver.got.slice(count).find((x) => JSON.parse(x.body).taskId === sent.body.rootTaskId);
    if (!r) throw new Error("no callback");
    expect(String(r.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    expect(standardVerify(after, r)).toMatchObject({ ok: true });
    expect(standardVerify(middle, r)).toMatchObject({ ok: true });
    expect(standardVerify(before, r)).toMatchObject({ ok: false });
    const header = r.headers["arbor-signature"] as string;
    expect(header.match(/v1=/g)).toHaveLength(2);
    expect(verifyCallback(after, header, r.body, nowSeconds(), new Set())).toMatchObject({ ok: true });
    expect(verifyCallback(middle, header, r.body, nowSeconds(), new Set())).toMatchObject({ ok: true });
    // Another tenant's secret is its own.
    const betas = String((await api("GET", "/v1/callbacks/secret", beta.key)).body.secret);
    expect([before, middle, after]).not.toContain(betas);
  });

  it("refuses a callbackUrl the outbound guard refuses outright with a 400, writing nothing", async () => {
    const conversations = async () => (await h.rt.resources.childUrns("cld:common.Tenant.acme")).length;
    const subscriptions = async () =>
      (await collectPages((cursor) => h.rt.state.byStatus(SUB_KIND, "open", cursor ? { cursor } : {})))
        .length +
      (await collectPages((cursor) => h.rt.state.byStatus(SUB_KIND, "done", cursor ? { cursor } : {})))
        .length;
    const [c0, s0] = [await conversations(), await subscriptions()];
    for (const callbackUrl of [
      "https://10.0.0.1/hook",
      "https://169.254.169.254/latest/meta-data/",
      "http://example.com/hook", // plain http, not loopback
      "https://user:secret@example.com/hook",
      "ftp://example.com/hook",
      "https://[::ffff:10.0.0.1]/hook",
      "not a url",
    ]) {
      const r = await api("POST", "/v1/messages", acme.key, { text: "Where?", callbackUrl });
      expect(r.status, callbackUrl).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(/callbackUrl is refused/);
    }
    expect(await conversations()).toBe(c0);
    expect(await subscriptions()).toBe(s0);
  });
});
