import type { AddressInfo } from "node:net";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { DEFAULT_LANE_LIMITS } from "../../shared/notify/lanes.ts";
import { QueuedNotify, type QueueMessage } from "../../shared/notify/queueing.ts";
import { type DeliveryQueue, deliveryMessage } from "../../shared/ports/delivery-queue.ts";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { Harness } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { type Receiver, startReceiver, until } from "./notify-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * One tenant's dead receivers cost only that tenant (issue: "a slow receiver stalls everyone's
 * deliveries"). Tenant beta sends 40 requests whose callbackUrl accepts the connection and never
 * answers; tenant acme's callbacks still leave at once. The real server, the real local worker
 * at its default settings (attempt timeout, lanes), real sockets on loopback.
 */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: "Done." };
};

/** A receiver that takes every connection and never answers; it counts connections open at once. */
interface Hanging {
  url: string;
  open: number;
  maxOpen: number;
  accepted: number;
  close(): Promise<void>;
}

async function startHanging(): Promise<Hanging> {
  const sockets = new Set<Socket>();
  const h: Hanging = { url: "", open: 0, maxOpen: 0, accepted: 0, close: async () => undefined };
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    h.accepted++;
    h.open++;
    h.maxOpen = Math.max(h.maxOpen, h.open);
    socket.on("data", () => undefined); // reads the request, answers nothing
    socket.on("close", () => {
      sockets.delete(socket);
      h.open--;
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  h.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  h.close = async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  };
  return h;
}

let h: Harness;
let server: RunningServer;
let notify: LocalNotify;
let good: Receiver;
let hanging: Hanging;

beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  await h.engine.registerAssistants("beta", GENERALIST);
  // The worker at its defaults: attempts time out after 10 s, lanes of 8 per tenant and 4 per host.
  notify = startLocalNotify(h.engine, { notify: { allowLoopbackHttp: true } });
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry] }),
    notify: notify.service,
  });
  good = await startReceiver();
  hanging = await startHanging();
});
afterAll(async () => {
  await hanging?.close(); // the attempts in flight fail at once, so the worker stops
  await server?.close();
  await notify?.stop();
  await good?.close();
  await h?.close();
});

async function post(key: string, body: unknown) {
  const response = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(202);
  return (await response.json()) as { rootTaskId: string };
}

describe("webhook deliveries, one tenant against another", () => {
  it("beta's 40 hanging receivers hold beta's lanes only: acme's callbacks leave at once", async () => {
    for (let i = 0; i < 40; i++) await post(beta.key, { text: `Beta ${i}?`, callbackUrl: hanging.url });
    // Beta's receivers are busy hanging: its host's lane is full.
    await until("beta's lane full", () => hanging.open >= DEFAULT_LANE_LIMITS.perHost);

    const sent = performance.now();
    const { rootTaskId } = await post(acme.key, { text: "Acme?", callbackUrl: `${good.url}/acme` });
    const mine = () => good.got.filter((r) => JSON.parse(r.body).taskId === rootTaskId);
    await until("acme's first callback", () => mine().length > 0);
    const firstAfterMs = performance.now() - sent;
    await until("acme's completed callback", () =>
      mine().some((r) => JSON.parse(r.body).state === "completed"),
    );
    // Before lanes: 46-56 s, behind beta's attempts (10 s each, 20 at a time).
    expect(firstAfterMs).toBeLessThan(1_000);
    // Beta never had more attempts in flight than its host's lane.
    expect(hanging.maxOpen).toBeLessThanOrEqual(DEFAULT_LANE_LIMITS.perHost);
    expect(hanging.open).toBe(DEFAULT_LANE_LIMITS.perHost);
  }, 60_000);
});

/**
 * The notify function's side (functions/notify.ts, queueing.ts), offline: a delivery queue whose
 * messages become visible after their delay, and ten consumers taking batches of up to ten, as
 * Lambda's SQS event source mapping hands them to concurrent invocations. The lanes are in the
 * state, so they bound beta across invocations: beta's attempts beyond its lane come back "busy"
 * at once and are queued again later, so they hold no consumer.
 */
class TestQueue implements DeliveryQueue {
  readonly messages: { id: number; body: string; visibleAt: number }[] = [];
  sent = 0;
  #next = 0;
  async enqueue(ids: readonly string[], options: { delaySeconds?: number } = {}): Promise<void> {
    for (const id of ids)
      this.messages.push({
        id: this.#next++,
        body: deliveryMessage(id),
        visibleAt: Date.now() + (options.delaySeconds ?? 0) * 1000,
      });
    this.sent += ids.length;
  }
  receive(max: number): QueueMessage[] {
    const now = Date.now();
    const batch: QueueMessage[] = [];
    for (let i = 0; i < this.messages.length && batch.length < max; ) {
      const m = this.messages[i] as (typeof this.messages)[0];
      if (m.visibleAt <= now) {
        this.messages.splice(i, 1);
        batch.push({ messageId: String(m.id), body: m.body });
      } else i++;
    }
    return batch;
  }
}

describe("webhook deliveries through the notify function's queue, one tenant against another", () => {
  it("beta's hanging receivers hold at most its lane's consumers: acme's delivery is attempted at once", async () => {
    await notify.worker.stop(); // the queue's consumers deliver from here on
    const queue = new TestQueue();
    // The service the API records through: what it records is queued (as the API function does).
    const queued = new QueuedNotify(notify.service, queue, h.engine.deps.log);
    const hang2 = await startHanging();
    let stop = false;
    const busyConsumers = { now: 0, max: 0 };
    const consumers = Array.from({ length: 10 }, async () => {
      while (!stop) {
        const batch = queue.receive(10);
        if (batch.length === 0) {
          await new Promise((r) => setTimeout(r, 10));
          continue;
        }
        busyConsumers.now++;
        busyConsumers.max = Math.max(busyConsumers.max, busyConsumers.now);
        try {
          await queued.handle(batch);
        } finally {
          busyConsumers.now--;
        }
      }
    });
    const off = queued.queueRecorded();
    try {
      for (let i = 0; i < 40; i++)
        await post(beta.key, { text: `Beta queued ${i}?`, callbackUrl: hang2.url });
      await until("beta's lane full", () => hang2.open >= DEFAULT_LANE_LIMITS.perHost);
      const sent = performance.now();
      const { rootTaskId } = await post(acme.key, {
        text: "Acme queued?",
        callbackUrl: `${good.url}/queued`,
      });
      const mine = () => good.got.filter((r) => JSON.parse(r.body).taskId === rootTaskId);
      await until("acme's first callback", () => mine().length > 0);
      expect(performance.now() - sent).toBeLessThan(1_000);
      // Beta holds no more than its host's lane, and no more consumers than that.
      expect(hang2.maxOpen).toBeLessThanOrEqual(DEFAULT_LANE_LIMITS.perHost);
      // Acme's consumer may still be returning from the delivery its receiver has just got: once it
      // has, only beta's remain busy (its receivers never answer, so more would stay more).
      await until(
        "only beta's consumers busy",
        () => busyConsumers.now <= DEFAULT_LANE_LIMITS.perHost,
        5_000,
      );
      // Beta's held-back deliveries wait in the queue, delayed, not in a consumer.
      expect(queue.messages.filter((m) => m.visibleAt > Date.now()).length).toBeGreaterThan(0);
    } finally {
      stop = true;
      off();
      await hang2.close();
      await Promise.all(consumers);
      await queued.settled();
    }
  }, 60_000);
});
