import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { claimDelivery, type DeliveryData, getDelivery } from "../../shared/notify/deliveries.ts";
import { postDelivery } from "../../shared/notify/sender.ts";
import { NotifyService } from "../../shared/notify/service.ts";
import { subscribe } from "../../shared/notify/subscriptions.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { Harness } from "../scenarios/engine-harness.ts";
import { acme, serveHttp } from "../scenarios/http-fixture.ts";
import { type Receiver, startReceiver, until } from "../scenarios/notify-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "../scenarios/scenarios.ts";
import { arborCli } from "../support/arbor-process.ts";

/**
 * Durable deliveries on the local runtime, with the engine's clock under the test's control (the
 * worker's "due" is that clock: backoff is tested without waiting): a receiver that fails three
 * times then succeeds gets each notification once by id, across a restart; an unreachable one ends
 * dead, visible to admins, redriven, delivered; two workers on one data folder send a delivery once.
 */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: "42" };
};
const admin = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const MINUTE = 60_000;

/** The real CLI on the harness's data folder (no lock: it works beside the running runtime). */
const arbor = async (dataDir: string, ...args: string[]) => arborWith({ ARBOR_DATA_DIR: dataDir }, ...args);
const arborWith = (env: Record<string, string>, ...args: string[]) =>
  arborCli(args, { ...process.env, ...env, NO_COLOR: "1" });

let h: Harness;
let notify: LocalNotify;
let receiver: Receiver;

const start = () =>
  startLocalNotify(h.engine, {
    notify: { allowLoopbackHttp: true },
    worker: { tickMs: 3_600_000, sweepEveryMs: 3_600_000 },
    random: () => 0,
  });

beforeEach(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  notify = start();
  receiver = await startReceiver();
});
afterEach(async () => {
  await notify?.stop();
  await receiver?.close();
  await h?.close();
});

/** A request of acme, answered, with a callback subscription to `url`; returns its root task. */
async function answeredWithCallback(url: string, id = "hook"): Promise<string> {
  const { rootTaskId } = await h.submit("What is the answer?");
  await notify.service.subscribe(rootTaskId, { kind: "callback", id, url, tenant: "acme" });
  await h.idle();
  expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
  return rootTaskId;
}

const attemptsOf = (r: Receiver) => {
  const out = new Map<string, number>();
  for (const g of r.got) {
    const id = String(g.headers["arbor-delivery-id"]);
    out.set(id, (out.get(id) ?? 0) + 1);
  }
  return out;
};

async function deliveriesOf(root: string): Promise<{ status?: string; data: DeliveryData }[]> {
  const page = await h.rt.state.byParent<DeliveryData>(`notify-deliveries#${root}`);
  return Promise.all(page.items.map(async (r) => (await getDelivery(h.rt.state, r.data.id)) ?? r));
}

describe("durable deliveries", () => {
  it("a receiver that fails three times, then succeeds, gets each notification once by id, across a restart", async () => {
    // Each id fails its first three attempts (500, 503, a cut connection), then is taken.
    receiver.answer = (r) => {
      const id = String(r.headers["arbor-delivery-id"]);
      const before = receiver.got.filter((g) => g.headers["arbor-delivery-id"] === id).length;
      return before === 0 ? 500 : before === 1 ? 503 : before === 2 ? "reset" : 200;
    };
    const root = await answeredWithCallback(receiver.url);
    await until("the first attempts", () => receiver.got.length >= 2);
    await notify.service.idle(); // their results written at this time, before the clock moves
    await notify.worker.runNow();
    const ids = [...attemptsOf(receiver).keys()];
    expect(ids).toHaveLength(2); // working, then completed
    expect([...attemptsOf(receiver).values()]).toEqual([1, 1]);

    h.advance(10 * MINUTE);
    await notify.worker.runNow();
    expect([...attemptsOf(receiver).values()]).toEqual([2, 2]);

    // The process goes away between attempts; a new one on the same data folder carries on.
    await notify.stop();
    await h.restart();
    notify = start();
    await notify.worker.runNow(true);
    expect([...attemptsOf(receiver).values()]).toEqual([2, 2]); // nothing is due yet: nothing sent
    h.advance(10 * MINUTE);
    await notify.worker.runNow();
    expect([...attemptsOf(receiver).values()]).toEqual([3, 3]);
    h.advance(10 * MINUTE);
    await notify.worker.runNow();
    h.advance(10 * MINUTE);
    await notify.worker.runNow();

    expect([...receiver.deliveredIds().values()]).toEqual([1, 1]);
    expect([...attemptsOf(receiver).values()]).toEqual([4, 4]);
    const records = await deliveriesOf(root);
    expect(records.map((r) => [r.status, r.data.attempts]).sort()).toEqual([
      ["delivered", 4],
      ["delivered", 4],
    ]);
    const states = receiver.got.filter((g) => g.answered === 200).map((g) => JSON.parse(g.body).state);
    expect(states.sort()).toEqual(["completed", "working"]);
  });

  it("an unreachable receiver ends dead after an hour of retries, is visible to admins (route and CLI), and is delivered once redriven", async () => {
    receiver.answer = () => "reset";
    const root = await answeredWithCallback(receiver.url);
    await until("the first attempts", () => receiver.got.length >= 2);
    await notify.service.idle(); // their results written at this time, before the clock moves
    for (let i = 0; i < 20; i++) {
      h.advance(10 * MINUTE);
      await notify.worker.runNow();
      if ((await deliveriesOf(root)).every((d) => d.status === "dead")) break;
    }
    const dead = await deliveriesOf(root);
    expect(dead.map((d) => d.status)).toEqual(["dead", "dead"]);
    for (const d of dead) {
      expect(Date.parse(d.data.deadAt ?? "") - Date.parse(d.data.createdAt)).toBeGreaterThanOrEqual(
        60 * MINUTE,
      );
      expect(d.data.attempts).toBeGreaterThanOrEqual(7);
      expect(d.data.lastError).toMatch(/fetch failed|socket|reset|closed/i);
    }
    expect(receiver.deliveredIds().size).toBe(0);
    await h.rt.untilDurable();
    const listed = await arbor(h.dataDir, "notify", "ls", "--dead");
    expect(listed.code).toBe(0);
    for (const d of dead) expect(listed.stdout).toContain(d.data.id);
    expect(listed.stdout).toContain(receiver.url);
    expect((await arbor(h.dataDir, "notify", "redrive", "dlv_nosuch")).code).toBe(1);

    const server: RunningServer = await serveHttp({
      engine: h.engine,
      keys: new ApiKeys({ keys: [acme.entry, admin.entry] }),
      notify: notify.service,
    });
    try {
      const get = (key: string, path: string, method = "GET", body?: unknown) =>
        fetch(`${server.url}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
      expect((await get(acme.key, "/v1/admin/deliveries?status=dead")).status).toBe(403);
      const listed = (await (await get(admin.key, "/v1/admin/deliveries?status=dead")).json()) as {
        deliveries: Record<string, unknown>[];
      };
      const [one, two] = dead.map((d) => d.data.id) as [string, string];
      // The CLI against the server, with an admin's key.
      const remote = await arborWith(
        { ARBOR_URL: server.url, ARBOR_KEY: admin.key },
        "notify",
        "ls",
        "--dead",
      );
      expect(remote.code).toBe(0);
      expect(remote.stdout).toContain(one);
      expect(remote.stdout).toContain(two);
      expect(listed.deliveries.map((d) => d.id).sort()).toEqual([one, two].sort());
      expect(listed.deliveries[0]).not.toHaveProperty("body");
      expect(listed.deliveries[0]).not.toHaveProperty("headers");
      expect(listed.deliveries[0]).toMatchObject({ status: "dead", url: receiver.url, rootTaskUrn: root });

      // The console's page of dead deliveries lists both, each with its redrive (the HTTP API's route).
      const signedIn = await fetch(`${server.url}/console/login`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ key: admin.key }).toString(),
        redirect: "manual",
      });
      const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0] as string;
      const page = await (
        await fetch(`${server.url}/console/admin/deliveries`, { headers: { cookie } })
      ).text();
      for (const id of [one, two])
        expect(page).toContain(`data-api="POST /v1/admin/deliveries/${id}/redrive"`);
      const csrf = /name="arbor-csrf" content="([^"]+)"/.exec(page)?.[1] ?? "";

      receiver.answer = () => 200;
      expect((await get(acme.key, `/v1/admin/deliveries/${one}/redrive`, "POST")).status).toBe(403);
      // Redriven from the console: its script's call, with the session and its CSRF token.
      const redriven = await fetch(`${server.url}/v1/admin/deliveries/${one}/redrive`, {
        method: "POST",
        headers: { cookie, "x-arbor-csrf": csrf, "content-type": "application/json" },
        body: "{}",
      });
      expect(redriven.status).toBe(200);
      await until("the redriven delivery", () => receiver.deliveredIds().has(one));
      const rest = (await (
        await get(admin.key, "/v1/admin/deliveries/redrive", "POST", { all: true })
      ).json()) as {
        redriven: string[];
      };
      expect(rest.redriven).toEqual([two]);
      await until("the other redriven delivery", () => receiver.deliveredIds().has(two));
      await notify.worker.runNow();
      expect([...receiver.deliveredIds().values()]).toEqual([1, 1]);
      expect((await get(admin.key, `/v1/admin/deliveries/${one}/redrive`, "POST")).status).toBe(400); // delivered, not dead
      expect((await get(admin.key, "/v1/admin/deliveries/dlv_nosuch/redrive", "POST")).status).toBe(404);
    } finally {
      await server.close();
    }
  });

  it("a crash after the POST, before 'delivered' is written: sent again once the lease ends, with the same id", async () => {
    receiver.answer = () => 200;
    await notify.stop();
    const { rootTaskId } = await h.submit("What is the answer?");
    await h.idle();
    await notify.service.subscribe(rootTaskId, {
      kind: "callback",
      id: "hook",
      url: receiver.url,
      tenant: "acme",
    });
    const [d] = await deliveriesOf(rootTaskId);
    const id = d?.data.id as string;
    // A process claims the delivery and POSTs it, then dies before it writes the result.
    const claimed = await claimDelivery(h.rt.state, id, "a process that died", h.engine.deps.clock(), 60_000);
    const secrets = await notify.service.callbackSecrets("acme");
    const posted = await postDelivery(notify.service.urls.fetch, claimed?.data as DeliveryData, {
      now: h.engine.deps.clock(),
      timeoutMs: 10_000,
      secrets,
    });
    expect(posted.delivered).toBe(true);
    notify = start();
    await notify.worker.runNow(true);
    expect(receiver.got).toHaveLength(1); // held by the lease: not sent again yet
    h.advance(61_000);
    await notify.worker.runNow();
    expect(receiver.got.map((g) => g.headers["arbor-delivery-id"])).toEqual([id, id]);
    expect(receiver.got[0]?.body).toBe(receiver.got[1]?.body); // the same notification, byte for byte
    expect(await getDelivery(h.rt.state, id)).toMatchObject({ status: "delivered", data: { attempts: 2 } });
  });

  it("wake-ups that come many times at once record each state once", async () => {
    receiver.answer = () => 200;
    await notify.stop();
    const { rootTaskId } = await h.submit("What is the answer?");
    await h.idle();
    const sub = { kind: "callback" as const, url: receiver.url, tenant: "acme" };
    // Written without the reconcile that subscribe does, so that the ten below race for it.
    await subscribe(h.rt.state, h.engine.deps.clock, rootTaskId, { ...sub, id: "race" });
    const recorded = (
      await Promise.all(Array.from({ length: 10 }, () => notify.service.reconcile(rootTaskId)))
    ).flat();
    expect(recorded).toHaveLength(1);
    expect((await deliveriesOf(rootTaskId)).map((d) => d.data.stateKey)).toEqual(["completed"]);
    expect(await notify.service.reconcile(rootTaskId)).toEqual([]);
  });

  it("a lost wake-up is caught by the sweep: what the state says is recorded and sent", async () => {
    receiver.answer = () => 200;
    await notify.stop(); // nobody listens to the bus: every wake-up of this request is lost
    const { rootTaskId } = await h.submit("What is the answer?");
    await notify.service.subscribe(rootTaskId, {
      kind: "callback",
      id: "hook",
      url: receiver.url,
      tenant: "acme",
    });
    await h.idle();
    expect((await deliveriesOf(rootTaskId)).map((d) => d.data.stateKey)).toEqual(["working"]);
    notify = start(); // sweeps at start
    await until("the completed callback", () =>
      receiver.got.some((g) => JSON.parse(g.body).state === "completed"),
    );
    await notify.worker.runNow();
    expect((await deliveriesOf(rootTaskId)).map((d) => [d.data.stateKey, d.status]).sort()).toEqual([
      ["completed", "delivered"],
      ["working", "delivered"],
    ]);
    expect([...receiver.deliveredIds().values()]).toEqual([1, 1]);
  });

  it("two workers on one data folder send each delivery once", async () => {
    receiver.answer = () => 200;
    await notify.stop(); // the deliveries are recorded first, then raced for
    const roots: string[] = [];
    for (let i = 0; i < 5; i++) roots.push((await h.submit(`Question ${i}?`)).rootTaskId);
    await h.idle();
    const a = notify.service;
    const other = createLocalRuntime({ mode: "local", tenant: "acme", dataDir: h.dataDir, durable: false });
    try {
      const b = new NotifyService({
        deps: { ...h.engine.deps, state: other.state },
        urls: notifyUrls(undefined, { allowLoopbackHttp: true }),
      });
      const ids: string[] = [];
      for (const root of roots)
        for (const id of ["x", "y"]) {
          await a.subscribe(root, { kind: "callback", id, url: receiver.url, tenant: "acme" });
          ids.push(
            ...(await deliveriesOf(root))
              .filter((d) => d.data.subscriptionKey.endsWith(`#${id}`))
              .map((d) => d.data.id),
          );
        }
      await h.rt.untilDurable();
      expect(ids).toHaveLength(10);
      const outcomes = await Promise.all(ids.flatMap((id) => [a.attempt(id), b.attempt(id), b.attempt(id)]));
      expect(outcomes.filter((o) => o === "delivered").length).toBeLessThanOrEqual(10);
      // What the race left (a claim refused while the other process held the database) goes now.
      await Promise.all([a.runDue(), b.runDue()]);
      expect(receiver.got).toHaveLength(10);
      expect([...receiver.deliveredIds().values()].every((n) => n === 1)).toBe(true);
    } finally {
      await other.close();
    }
  });
});
