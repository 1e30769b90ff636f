import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/channels/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http-server.ts";
import { SUB_KIND } from "../../shared/notify/subscriptions.ts";
import { collectPages } from "../../shared/ports/state-store.ts";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local-notify.ts";
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
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, admin.entry] }),
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
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
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

  it("rotation: admins only; the next callbacks carry the new signature and, for a day, the old one", async () => {
    const before = String((await api("GET", "/v1/callbacks/secret", acme.key)).body.secret);
    expect((await api("POST", "/v1/admin/callbacks/secret/rotate", acme.key)).status).toBe(403);
    const rotated = await api("POST", "/v1/admin/callbacks/secret/rotate", admin.key);
    expect(rotated.status).toBe(200);
    const after = String(rotated.body.secret);
    expect(after).not.toBe(before);
    expect((await api("GET", "/v1/callbacks/secret", acme.key)).body).toMatchObject({
      secret: after,
      previous: { secret: before },
    });
    const count = receiver.got.length;
    const sent = await api("POST", "/v1/messages", acme.key, {
      text: "And when?",
      callbackUrl: `${receiver.url}/hooks/arbor`,
    });
    await until("a callback after the rotation", () =>
      receiver.got.slice(count).some((r) => JSON.parse(r.body).taskId === sent.body.rootTaskId),
    );
    const r = receiver.got.slice(count).find((x) => JSON.parse(x.body).taskId === sent.body.rootTaskId);
    const header = r?.headers["arbor-signature"] as string;
    expect(header.match(/v1=/g)).toHaveLength(2);
    expect(verifyCallback(after, header, r?.body ?? "", nowSeconds(), new Set())).toMatchObject({ ok: true });
    expect(verifyCallback(before, header, r?.body ?? "", nowSeconds(), new Set())).toMatchObject({
      ok: true,
    });
    // Another tenant's secret is its own.
    const theirs = String((await api("GET", "/v1/callbacks/secret", beta.key)).body.secret);
    expect([before, after]).not.toContain(theirs);
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
