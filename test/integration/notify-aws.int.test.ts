import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { PutRuleCommand } from "@aws-sdk/client-eventbridge";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dlqCommand } from "../../cli/lib/dlq.ts";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createNotifyHandler, type NotifyHandler } from "../../functions/notify.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { compilePattern } from "../../shared/kernel/event-pattern/index.ts";
import { NOTIFY_WAKE_PATTERN, NOTIFY_WAKE_RULE } from "../../shared/notify/wakeups.ts";
import { deliveryOfMessage } from "../../shared/ports/delivery-queue.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import { seed003Request } from "../fixtures/seed-003.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import type { EventBridgePeer } from "../peers/eventbridge-peer.ts";
import { planningModel } from "../peers/planning-model.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";
import { pollQueue } from "../peers/sqs-poll.ts";
import { type Receiver, startReceiver } from "../scenarios/notify-fixture.ts";
import {
  type AwsWorld,
  apiGuard,
  EventBridgePlayer,
  guarded,
  notifyGuard,
  startAwsWorld,
} from "./aws-world.ts";

/**
 * Webhook deliveries on AWS, offline: the API function takes the request and records the
 * subscription, the step functions run on the events EventBridge feeds them, the notify function
 * (functions/notify.ts) consumes the wake queue and the delivery queue, and a real webhook
 * receiver (node:http on loopback; the test's outbound policy allows loopback with
 * ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP, the same code path as https on Lambda) gets the pushes.
 *
 * The peers: DynamoDB Local, s3rver, the EventBridge peer (the wake rule's `$or` pattern is put on
 * it, and it accepts it), the SQS peer (the two queues, the stack's dead-letter queue with the
 * queues' redrive policy), fake Bedrock, fake Titan and S3 Vectors; every client the real SDK's.
 * The test plays two parts of AWS:
 *   - EventBridge: the step events go to the step functions (EventBridgePlayer); the events the wake
 *     rule's pattern matches go to the wake queue, as the rule's SQS target sends them (the event
 *     as the message body; the EventBridge peer delivers only to http targets, so the player sends);
 *   - Lambda's SQS event source mapping: a batch received (up to 10, the stack's visibility
 *     timeout), handed to the notify function as `{ Records }`, the messages not in
 *     `batchItemFailures` deleted. Time passing (a retry's delay, a visibility timeout) is the SQS
 *     peer making delayed messages visible and the notify function's clock moved on.
 */
const BUS = "arbor-notify-aws";
const TENANT = "acme";
const admin = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });
const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: TENANT, roles: [] });

const ANALYST = { purpose: "Work out costs with arithmetic" };
const COORDINATOR = {
  purpose: "Coordinate a small team event and combine its parts into one answer",
  evaluation: "The answer gives the cost per person",
};
const TEAM = {
  assistants: [
    { name: "Coordinator", id: "coordinator", ...COORDINATOR },
    { name: "Analyst", id: "analyst", ...ANALYST },
  ],
};
const ANSWER = "The cost per person is 100 EUR.";

/** The model: one plan with one part, the part's answer, an evaluation that passes. */
const model = planningModel({
  plan: { name: "Cost per person", ...COORDINATOR, subtasks: [{ name: "Cost estimate", ...ANALYST }] },
  evaluation: { reason: "it is there", answer: ANSWER },
  leaf: () => ({ content: ANSWER }),
});

describe("webhook deliveries on AWS: the notify function between the engine's events and the receivers", () => {
  let world: AwsWorld;
  let peer: EventBridgePeer;
  let sqsPeer: SqsPeer;
  let sqs: SQSClient;
  let config: AwsConfig;
  let rt: AwsRuntime;
  let api: ApiHandler;
  let steps: StepHandler[];
  let notify: NotifyHandler;
  let receiver: Receiver;
  let wakeUrl: string;
  let deliveryUrl: string;
  let dlqUrl: string;
  /** How far the notify function's clock is ahead of the wall clock (time the test let pass). */
  let skew = 0;
  const sentToWake = new Set<string>();
  /** How wake-ups reach the wake queue: once each, in order; or twice each, newest first. */
  let wakeOrder: "once" | "twice, reversed" = "once";
  const wakeMatches = compilePattern(NOTIFY_WAKE_PATTERN);

  const { drain } = new EventBridgePlayer(
    () => world,
    BUS,
    () => steps,
  );

  const call = async (event: APIGatewayProxyEventV2) => {
    const res = await api(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return { status: res.statusCode, json: (body ? JSON.parse(body) : {}) as Record<string, unknown> };
  };

  /** The wake rule's SQS target: each matching event on the bus, as the message body. */
  const forwardWakeups = async (): Promise<number> => {
    const fresh = peer.eventsOn(BUS).filter((e) => !sentToWake.has(e.id) && wakeMatches(e as BusEnvelope));
    for (const e of fresh) sentToWake.add(e.id);
    const sent = wakeOrder === "once" ? fresh : [...fresh, ...fresh].reverse();
    for (const e of sent)
      await sqs.send(new SendMessageCommand({ QueueUrl: wakeUrl, MessageBody: JSON.stringify(e) }));
    return sent.length;
  };

  /** Lambda's event source mapping (test/peers/sqs-poll.ts). */
  const poll = (queueUrl: string, fn: NotifyHandler = notify): Promise<number> =>
    pollQueue(sqs, sqsPeer, queueUrl, fn);

  /** AWS until it is quiet: steps on their events, wake-ups to the wake queue, both queues consumed. */
  const settle = async (): Promise<void> => {
    for (let round = 0; round < 50; round++) {
      const moved =
        (await drain()) + (await forwardWakeups()) + (await poll(wakeUrl)) + (await poll(deliveryUrl));
      if (moved === 0) return;
    }
    throw new Error("the notify path did not settle within 50 rounds");
  };

  /** Time passes: the notify function's clock moves on and what was delayed in the queues is visible. */
  const wait = (ms: number) => {
    skew += ms;
    sqsPeer.showDelayed(deliveryUrl);
  };

  const deliveredIds = (path: string) => {
    const out = new Map<string, number>();
    for (const r of receiver.got)
      if (r.path === path && typeof r.answered === "number" && r.answered < 300) {
        const id = String(r.headers["arbor-delivery-id"]);
        out.set(id, (out.get(id) ?? 0) + 1);
      }
    return out;
  };
  const received = (path: string) => receiver.got.filter((r) => r.path === path);

  /** A 1.0 SendMessage with a push config and returnImmediately, through the API function. */
  const sendWithPush = async (text: string, url: string, token: string) =>
    call(
      apiEvent("POST", "/a2a", {
        key: partner.key,
        headers: { "a2a-version": "1.0" },
        body: {
          jsonrpc: "2.0",
          id: randomUUID(),
          method: "SendMessage",
          params: {
            message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] },
            configuration: {
              acceptedOutputModes: ["text/plain"],
              returnImmediately: true,
              taskPushNotificationConfig: { url, token },
            },
          },
        },
      }),
    );

  beforeAll(async () => {
    sqsPeer = await SqsPeer.start();
    sqs = sqsPeer.client();
    dlqUrl = sqsPeer.createQueue("arbor-dlq");
    wakeUrl = sqsPeer.createQueue("arbor-notify-wake");
    deliveryUrl = sqsPeer.createQueue("arbor-notify-deliveries");
    // The queues' redrive policy, as the stack sets it (infra/constructs/notify-function.ts MAX_RECEIVES).
    sqsPeer.redrive(wakeUrl, dlqUrl, 5);
    sqsPeer.redrive(deliveryUrl, dlqUrl, 5);
    world = await startAwsWorld({
      name: "arbor-notify",
      bus: BUS,
      model,
      env: {
        ARBOR_TENANT: TENANT,
        ARBOR_STAGE: "notify-test",
        ARBOR_PUBLIC_URL: PUBLIC_URL,
        ARBOR_A2A_BLOCKING_WAIT_MS: "25000",
        ARBOR_NOTIFY_QUEUE_URL: deliveryUrl,
        ARBOR_SQS_ENDPOINT: sqsPeer.endpoint,
        // The receivers are on loopback: the development switch (refused on Lambda by loadConfig).
        ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true",
      },
    });
    ({ peer, config } = world);
    const clients = world.clients;
    // The API function and the notify function on one clock, which the test moves on (`wait`).
    const clock = () => new Date(Date.now() + skew);
    api = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => config,
        clients,
        sqs,
        engine: { clients: world.engineClients, clock },
      }),
    );
    const stepDeps = {
      config: () => config,
      clients,
      engine: { clients: world.engineClients, settings: { turnStepMs: 0 } },
    };
    steps = [createStepHandler(stepDeps), createStepHandler(stepDeps)];
    notify = guarded(
      notifyGuard(world, [wakeUrl, deliveryUrl], [sqs]),
      createNotifyHandler({
        config: () => config,
        clients,
        sqs,
        engine: { clock },
        notify: { random: () => 0.5 },
      }),
    );
    receiver = await startReceiver();
    rt = createAwsRuntime(config, clients);
    const keys = new StateKeyStore(rt.state);
    for (const k of [admin, partner]) await keys.add(k.entry);
    expect((await call(apiEvent("PUT", "/v1/admin/team", { key: admin.key, body: TEAM }))).status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    for (const s of steps ?? []) await s.close();
    await notify?.close();
    await api?.close();
    await rt?.close();
    await receiver?.close();
    sqs?.destroy();
    await sqsPeer?.close();
    await world?.close();
  });

  it("the wake rule's one $or pattern is taken by EventBridge (the peer checks it as EventBridge does)", async () => {
    await world.clients.eventbridge.send(
      new PutRuleCommand({
        Name: NOTIFY_WAKE_RULE,
        EventBusName: BUS,
        EventPattern: JSON.stringify(NOTIFY_WAKE_PATTERN),
      }),
    );
    expect(peer.calls.filter((c) => c.operation === "PutRule").map((c) => c.status)).toEqual([200]);
  });

  it("seed 003 section 8.1 (1.0: returnImmediately): an immediate ACK, then the final Task at the webhook with the bearer token and the answer", async () => {
    const token = randomUUID();
    const ack = await sendWithPush(
      "What is the cost per person?",
      `${receiver.url}/api/webhook/tasks`,
      token,
    );
    expect(ack.status).toBe(200);
    const task = (ack.json.result as { task: { id: string; status: { state: string } } }).task;
    expect(["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]).toContain(task.status.state);
    // What the API function recorded (the first notification) was queued before it answered.
    expect(sqsPeer.messages(deliveryUrl).length).toBeGreaterThan(0);

    await settle();
    const pushes = received("/api/webhook/tasks").map((r) => ({
      ...r,
      json: JSON.parse(r.body) as {
        task: { id: string; status: { state: string }; artifacts?: { parts: { text?: string }[] }[] };
      },
    }));
    const final = pushes.find((p) => p.json.task.status.state === "TASK_STATE_COMPLETED");
    expect(final).toBeDefined();
    expect(final?.headers.authorization).toBe(`Bearer ${token}`);
    expect(final?.json.task.id).toBe(task.id);
    expect(final?.json.task.artifacts?.[0]?.parts[0]?.text).toBe(ANSWER);
    for (const p of pushes) expect(p.headers.authorization).toBe(`Bearer ${token}`);
    expect([...deliveredIds("/api/webhook/tasks").values()].every((n) => n === 1)).toBe(true);
  });

  it("seed 003 section 8.1 verbatim (0.3 message/send, blocking false, no version header): an ACK, then the final Task with the bearer token", async () => {
    const token = randomUUID();
    const body = seed003Request(`${receiver.url}/api/webhook/seed-03`, token);
    const event = apiEvent("POST", "/a2a", { key: partner.key });
    const ack = await call({
      ...event,
      body,
      headers: {
        ...event.headers,
        "content-type": "application/json",
        "content-length": String(body.length),
      },
    });
    const result = ack.json.result as { id: string; kind: string; status: { state: string } };
    expect(ack.json.error).toBeUndefined();
    expect(result.kind).toBe("task");
    expect(["submitted", "working"]).toContain(result.status.state);
    await settle();
    const final = received("/api/webhook/seed-03").find(
      (r) => (JSON.parse(r.body) as { status?: { state: string } }).status?.state === "completed",
    );
    expect(final?.headers.authorization).toBe(`Bearer ${token}`);
    const task = JSON.parse(final?.body ?? "{}") as {
      id: string;
      kind: string;
      artifacts: { parts: { kind: string; text?: string }[] }[];
    };
    expect(task).toMatchObject({ id: result.id, kind: "task" });
    expect(task.artifacts[0]?.parts).toContainEqual({ kind: "text", text: ANSWER });
  });

  it("every wake-up delivered twice and newest first: each notification once by id", async () => {
    wakeOrder = "twice, reversed";
    try {
      await sendWithPush("What is the cost per person?", `${receiver.url}/twice`, "tok-twice");
      await settle();
    } finally {
      wakeOrder = "once";
    }
    const ids = deliveredIds("/twice");
    expect(ids.size).toBeGreaterThanOrEqual(2); // working, then completed
    for (const n of ids.values()) expect(n).toBe(1);
    // Order is not promised (the two are attempted in one batch): the receiver dedupes and orders by the task.
    expect(received("/twice").some((r) => r.body.includes("TASK_STATE_COMPLETED"))).toBe(true);
  });

  it("a receiver that fails three times then succeeds: each notification once by id, the retries queued with a delay", async () => {
    receiver.plan = [503, 503, 503];
    const sent = await call(
      apiEvent("POST", "/v1/messages", {
        key: admin.key,
        body: { text: "What is the cost per person?", callbackUrl: `${receiver.url}/flaky` },
      }),
    );
    expect(sent.status).toBe(202);
    await settle();
    for (let i = 0; i < 10 && received("/flaky").filter((r) => r.answered === 503).length < 3; i++) {
      wait(15 * 60_000);
      await settle();
    }
    // Every retry waited in the queue (DelaySeconds) until its time came.
    wait(15 * 60_000);
    await settle();
    expect(received("/flaky").filter((r) => r.answered === 503)).toHaveLength(3);
    const ids = deliveredIds("/flaky");
    for (const n of ids.values()) expect(n).toBe(1);
    const failedIds = new Set(
      received("/flaky")
        .filter((r) => r.answered === 503)
        .map((r) => r.headers["arbor-delivery-id"]),
    );
    for (const id of failedIds) expect(ids.get(String(id))).toBe(1);
    const bodies = received("/flaky")
      .filter((r) => r.answered === 200)
      .map((r) => JSON.parse(r.body) as { type: string });
    expect(bodies.map((b) => b.type)).toContain("task.completed");
  });

  it("an unreachable receiver: dead after the retry window, listed by the admin route, redriven, delivered", async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/gone`;
    await sendWithPush("What is the cost per person?", url, "tok-gone");
    await settle();
    for (let i = 0; i < 12; i++) {
      wait(15 * 60_000);
      await settle();
    }
    const dead = await call(apiEvent("GET", "/v1/admin/deliveries?status=dead", { key: admin.key }));
    expect(dead.status).toBe(200);
    const deliveries = (dead.json.deliveries as { id: string; url: string; lastError?: string }[]).filter(
      (d) => d.url === url,
    );
    expect(deliveries.length).toBeGreaterThan(0);
    for (const d of deliveries) expect(d.lastError).toBeTruthy();

    const back = await listenOn(port);
    try {
      for (const d of deliveries) {
        const redriven = await call(
          apiEvent("POST", `/v1/admin/deliveries/${d.id}/redrive`, { key: admin.key }),
        );
        expect(redriven.status).toBe(200);
      }
      // The API function queued each redriven delivery before it answered.
      await settle();
      expect(new Set(back.got.map((r) => r.id))).toEqual(new Set(deliveries.map((d) => d.id)));
    } finally {
      await back.close();
    }
  });

  it("a queue message lost: the schedule's sweep queues the delivery again, and it is sent", async () => {
    const sent = await call(
      apiEvent("POST", "/v1/messages", {
        key: admin.key,
        body: { text: "What is the cost per person?", callbackUrl: `${receiver.url}/lost` },
      }),
    );
    expect(sent.status).toBe(202);
    // The first notification's message, queued by the API function, is lost in transit.
    const lost = sqsPeer.lose(deliveryUrl, () => true);
    expect(lost).toBeGreaterThan(0);
    expect(received("/lost")).toEqual([]);
    const swept = (await notify({ notify: "sweep" })) as { queued: number };
    expect(swept.queued).toBeGreaterThan(0);
    await settle();
    const ids = deliveredIds("/lost");
    expect(ids.size).toBeGreaterThanOrEqual(2);
    for (const n of ids.values()) expect(n).toBe(1);
  });

  it("a message the notify function keeps failing goes to the dead-letter queue; `arbor dlq redrive` sends it back to its queue", async () => {
    const sent = await call(
      apiEvent("POST", "/v1/messages", {
        key: admin.key,
        body: { text: "What is the cost per person?", callbackUrl: `${receiver.url}/crash` },
      }),
    );
    expect(sent.status).toBe(202);
    const queued = sqsPeer.messages(deliveryUrl).map((m) => deliveryOfMessage(m.body));
    expect(queued.length).toBeGreaterThan(0);
    // A notify function whose state table does not answer: every message fails, five times over.
    const broken = createNotifyHandler({
      config: () => ({ ...config, endpoints: { ...config.endpoints, dynamodb: "http://127.0.0.1:9" } }),
      clients: { s3: world.clients.s3, eventbridge: world.clients.eventbridge },
      sqs,
    });
    try {
      for (let i = 0; i < 6; i++) {
        await poll(deliveryUrl, broken);
        sqsPeer.showDelayed(deliveryUrl); // the visibility timeout passes
      }
    } finally {
      await broken.close();
    }
    expect(sqsPeer.messages(deliveryUrl)).toEqual([]);
    const letters = sqsPeer.messages(dlqUrl);
    expect(letters.map((m) => deliveryOfMessage(m.body))).toEqual(queued);
    expect(received("/crash")).toEqual([]);

    const lines: string[] = [];
    const code = await dlqCommand(
      "redrive",
      { queue: dlqUrl, bus: BUS, dryRun: false, max: undefined },
      { policiesPrefix: "", policyRecheckMs: 60_000, endpoints: {} },
      (line) => lines.push(line),
      { sqs },
    );
    expect(code).toBe(0);
    expect(lines.join("\n")).toMatch(/notify function failed every time/);
    expect(sqsPeer.messages(dlqUrl)).toEqual([]);
    await settle();
    const ids = deliveredIds("/crash");
    expect(ids.size).toBeGreaterThanOrEqual(2);
    for (const n of ids.values()) expect(n).toBe(1);
  });
});

/** A loopback port nobody listens on (connections to it are refused). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** A receiver on a given port, answering 200 and remembering each delivery id. */
async function listenOn(port: number): Promise<{ got: { id: string }[]; close(): Promise<void> }> {
  const got: { id: string }[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      got.push({ id: String(req.headers["arbor-delivery-id"]) });
      res.writeHead(200, { connection: "close" }).end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return {
    got,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
