/**
 * The EventBus contract on the EventBridge adapter, with the real AWS SDK v3 client talking to the
 * local EventBridge peer (test/peers/eventbridge-peer.ts). Delivery flows the way it does on AWS:
 * PutEvents -> peer -> rule match -> target (an HTTP receiver standing in for the routing Lambda)
 * -> `dispatch`. Plus what only this adapter does: batching, partial-failure retries, SDK errors.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  DeleteRuleCommand,
  EventBridgeClient,
  type EventBridgeClientConfig,
  ListRulesCommand,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import { SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { StepInputSchema } from "../../functions/engine-step.ts";
import {
  EVENT_ID_DETAIL_KEY,
  EventBridgeEventBus,
  type EventBridgeEventBusOptions,
} from "../../shared/adapters/aws/eventbridge-event-bus.ts";
import { COMMAND_MESSAGE_KIND, SqsCommandQueues } from "../../shared/adapters/aws/sqs-command-queues.ts";
import { UnavailableError, ValidationError } from "../../shared/kernel/errors.ts";
import type { BusEnvelope, BusEventInput } from "../../shared/ports/event-bus.ts";
import { EventBridgePeer } from "../peers/eventbridge-peer.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";
import { type BusFixture, eventBusContract } from "./event-bus.contract.ts";

const ACCOUNT = "123456789012";
const REGION = "us-east-1";

let peer: EventBridgePeer;
let endpoint: string;
let busCounter = 0;

beforeAll(async () => {
  peer = new EventBridgePeer({ account: ACCOUNT });
  ({ endpoint } = await peer.start());
});

afterAll(async () => {
  await peer.stop();
});

function sdkClient(config: Partial<EventBridgeClientConfig> = {}): EventBridgeClient {
  return new EventBridgeClient({
    endpoint,
    region: REGION,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    ...config,
  });
}

function uniqueBusName(label: string): string {
  busCounter += 1;
  return `${label}-${process.pid}-${busCounter}`;
}

/** An HTTP server standing in for the routing Lambda: POST /dispatch/<subscription> -> bus.dispatch. */
async function startReceiver(bus: EventBridgeEventBus): Promise<{ url: string; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const m = (req.url ?? "").match(/^\/dispatch\/([^/?]+)$/);
      if (req.method !== "POST" || !m?.[1]) {
        res.writeHead(404).end();
        return;
      }
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400).end("not JSON");
        return;
      }
      bus.dispatch(body, { subscription: decodeURIComponent(m[1]) }).then(
        () => res.writeHead(200).end(),
        (error: unknown) => res.writeHead(500).end(error instanceof Error ? error.message : String(error)),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface AwsFixture extends BusFixture {
  bus: EventBridgeEventBus;
  busName: string;
  sleeps: number[];
}

async function awsFixture(options: Partial<EventBridgeEventBusOptions> = {}): Promise<AwsFixture> {
  const busName = uniqueBusName("contract");
  const client = options.client ?? sdkClient();
  const sleeps: number[] = [];
  const bus = new EventBridgeEventBus({
    client,
    eventBusName: busName,
    account: ACCOUNT,
    region: REGION,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    ...options,
  });
  const receiver = await startReceiver(bus);
  const pending = new Set<Promise<unknown>>();
  const rules = new Set<string>();
  const track = (p: Promise<unknown>) => {
    pending.add(p);
    void p.then(
      () => pending.delete(p),
      () => pending.delete(p),
    );
  };
  const removeRule = async (name: string) => {
    await client.send(new RemoveTargetsCommand({ Rule: name, EventBusName: busName, Ids: ["dispatch"] }));
    await client.send(new DeleteRuleCommand({ Name: name, EventBusName: busName }));
    rules.delete(name);
  };
  const settle = async () => {
    while (pending.size > 0) await Promise.allSettled([...pending]);
    await peer.idle();
  };

  return {
    bus,
    busName,
    sleeps,
    async subscribe(sub) {
      const off = bus.subscribe(sub); // validates the pattern first
      try {
        await client.send(
          new PutRuleCommand({
            Name: sub.name,
            EventBusName: busName,
            EventPattern: JSON.stringify(sub.pattern),
          }),
        );
        rules.add(sub.name);
        const targets = await client.send(
          new PutTargetsCommand({
            Rule: sub.name,
            EventBusName: busName,
            Targets: [{ Id: "dispatch", Arn: `${receiver.url}/dispatch/${encodeURIComponent(sub.name)}` }],
          }),
        );
        if (targets.FailedEntryCount)
          throw new Error(`PutTargets failed: ${JSON.stringify(targets.FailedEntries)}`);
      } catch (error) {
        off();
        throw error;
      }
      return () => {
        off();
        track(removeRule(sub.name));
      };
    },
    settle,
    async cleanup() {
      await settle();
      for (const name of [...rules]) await removeRule(name);
      await bus.close();
      await receiver.close();
      if (!options.client) client.destroy();
    },
  };
}

eventBusContract("EventBridgeEventBus (real SDK client -> local EventBridge peer)", () => awsFixture());

function ev(
  id: string,
  detail: Record<string, unknown> = {},
  extra: Partial<BusEventInput> = {},
): BusEventInput {
  return { id, source: "arbor.test", detailType: "TaskStarted", detail, ...extra };
}

function envelope(overrides: Partial<BusEnvelope> = {}): BusEnvelope {
  return {
    version: "0",
    id: "aws-generated-id",
    "detail-type": "TaskStarted",
    source: "arbor.test",
    account: ACCOUNT,
    time: "2024-05-01T12:34:56Z",
    region: REGION,
    resources: [],
    detail: { taskId: "t1" },
    ...overrides,
  };
}

describe("EventBridgeEventBus specifics", () => {
  let f: AwsFixture | undefined;

  afterEach(async () => {
    peer.throttleNextEntries(0);
    peer.failNextRequests(0);
    await f?.cleanup();
    f = undefined;
  });

  it("sends 25 events as PutEvents batches of 10, 10 and 5", async () => {
    f = await awsFixture();
    const before = peer.calls.length;
    await f.bus.publish(Array.from({ length: 25 }, (_, i) => ev(`batch-${i}`, { i })));
    const puts = peer.calls.slice(before).filter((c) => c.operation === "PutEvents");
    expect(puts.map((c) => c.entries)).toEqual([10, 10, 5]);
    expect(peer.eventsOn(f.busName)).toHaveLength(25);
  });

  it("keeps every PutEvents request under 256 KiB", async () => {
    f = await awsFixture();
    const before = peer.calls.length;
    const blob = "y".repeat(100 * 1024);
    await f.bus.publish([ev("big-1", { blob }), ev("big-2", { blob }), ev("big-3", { blob })]);
    const puts = peer.calls.slice(before).filter((c) => c.operation === "PutEvents");
    expect(puts.map((c) => [c.entries, c.status])).toEqual([
      [2, 200],
      [1, 200],
    ]);
  });

  it("carries the publisher's id through EventBridge, which assigns its own", async () => {
    f = await awsFixture();
    const got: BusEnvelope[] = [];
    await f.subscribe({
      name: "ids",
      pattern: { source: ["arbor.test"] },
      handler: async (e) => void got.push(e),
    });
    await f.bus.publish([ev("publisher-id-1", { a: 1 })]);
    await f.settle();

    const [stored] = peer.eventsOn(f.busName);
    expect(stored?.id).not.toBe("publisher-id-1");
    expect(stored?.detail).toEqual({ a: 1, [EVENT_ID_DETAIL_KEY]: "publisher-id-1" });
    expect(stored?.account).toBe(ACCOUNT);
    expect(stored?.region).toBe(REGION);
    expect(got.map((e) => [e.id, e.detail])).toEqual([["publisher-id-1", { a: 1 }]]);
  });

  it("refuses a detail that uses the reserved id key, sending nothing", async () => {
    f = await awsFixture();
    const before = peer.calls.length;
    await expect(
      f.bus.publish([ev("ok-1"), ev("reserved-1", { [EVENT_ID_DETAIL_KEY]: "x" })]),
    ).rejects.toBeInstanceOf(ValidationError);
    expect(peer.calls.length).toBe(before);
  });

  it("retries the entries EventBridge throttled, with backoff, until all are accepted", async () => {
    f = await awsFixture();
    const got: string[] = [];
    await f.subscribe({
      name: "all",
      pattern: { source: ["arbor.test"] },
      handler: async (e) => void got.push(e.id),
    });
    const before = peer.calls.length;
    peer.throttleNextEntries(3);

    const ids = ["p-1", "p-2", "p-3", "p-4", "p-5"];
    await f.bus.publish(ids.map((id) => ev(id)));
    await f.settle();

    const puts = peer.calls.slice(before).filter((c) => c.operation === "PutEvents");
    expect(puts.map((c) => [c.entries, c.failed])).toEqual([
      [5, 3],
      [3, 0],
    ]);
    expect(f.sleeps).toHaveLength(1);
    expect(f.sleeps[0]).toBeGreaterThanOrEqual(50);
    expect(f.sleeps[0]).toBeLessThanOrEqual(100);
    expect(
      peer
        .eventsOn(f.busName)
        .map((e) => e.detail[EVENT_ID_DETAIL_KEY])
        .sort(),
    ).toEqual(ids);
    expect(got.sort()).toEqual(ids);
  });

  it("throws UnavailableError naming the ids and codes when entries keep failing", async () => {
    f = await awsFixture({ maxAttempts: 4 });
    peer.throttleNextEntries(1000);
    const before = peer.calls.length;

    const error = await f.bus.publish([ev("stuck-1"), ev("stuck-2")]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(UnavailableError);
    const message = (error as UnavailableError).message;
    expect(message).toContain("stuck-1 (ThrottlingException)");
    expect(message).toContain("stuck-2 (ThrottlingException)");
    expect((error as UnavailableError).details.failed).toEqual([
      { id: "stuck-1", errorCode: "ThrottlingException", errorMessage: "Rate exceeded." },
      { id: "stuck-2", errorCode: "ThrottlingException", errorMessage: "Rate exceeded." },
    ]);
    expect(peer.calls.slice(before).filter((c) => c.operation === "PutEvents")).toHaveLength(4);
    // exponential: each delay's range doubles (equal jitter: between half and all of 100 ms * 2^(n-1))
    expect(f.sleeps).toHaveLength(3);
    f.sleeps.forEach((ms, i) => {
      expect(ms).toBeGreaterThanOrEqual(50 * 2 ** i);
      expect(ms).toBeLessThanOrEqual(100 * 2 ** i);
    });
    expect(peer.eventsOn(f.busName)).toEqual([]);
  });

  it("does not retry entries EventBridge rejects as malformed: ValidationError at once", async () => {
    f = await awsFixture();
    peer.throttleNextEntries(1, "MalformedDetail");
    const before = peer.calls.length;
    await expect(f.bus.publish([ev("bad-entry-1")])).rejects.toBeInstanceOf(ValidationError);
    expect(peer.calls.slice(before)).toHaveLength(1);
    expect(f.sleeps).toEqual([]);
  });

  it("surfaces HTTP 500 answers (after the SDK's own retries) as UnavailableError with the cause", async () => {
    f = await awsFixture();
    peer.failNextRequests(100);
    const error = await f.bus.publish([ev("five-hundred-1")]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnavailableError);
    expect((error as UnavailableError).message).toContain("five-hundred-1");
    expect((error as UnavailableError).details.httpStatus).toBe(500);
    expect(((error as UnavailableError).cause as Error).name).toBe("InternalException");
    expect(peer.eventsOn(f.busName)).toEqual([]);
  });

  it("lets the SDK's retry absorb a single HTTP 500", async () => {
    f = await awsFixture();
    peer.failNextRequests(1);
    await f.bus.publish([ev("one-five-hundred-1")]);
    expect(peer.eventsOn(f.busName)).toHaveLength(1);
  });

  it("maps a connection failure to UnavailableError", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", () => resolve()));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const client = sdkClient({ endpoint: `http://127.0.0.1:${port}`, maxAttempts: 2 });
    const bus = new EventBridgeEventBus({ client, eventBusName: "nowhere" });
    try {
      const error = await bus.publish([ev("refused-1")]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnavailableError);
      expect((error as UnavailableError).cause).toBeInstanceOf(Error);
    } finally {
      await bus.close();
      client.destroy();
    }
  });

  it("dispatch throws ValidationError for a malformed envelope and runs no handler", async () => {
    f = await awsFixture();
    const got: string[] = [];
    f.bus.subscribe({
      name: "any",
      pattern: { source: ["arbor.test"] },
      handler: async (e) => void got.push(e.id),
    });
    const { detail: _detail, ...noDetail } = envelope();
    for (const bad of [
      "not an object",
      null,
      noDetail,
      envelope({ version: "1" as "0" }),
      { ...envelope(), detail: [1, 2] },
      { ...envelope(), resources: "cld:x" },
      envelope({ detail: { [EVENT_ID_DETAIL_KEY]: 42 } }),
    ]) {
      await expect(f.bus.dispatch(bad)).rejects.toBeInstanceOf(ValidationError);
    }
    expect(got).toEqual([]);
  });

  it("dispatch runs every matching handler, then throws if one failed", async () => {
    f = await awsFixture();
    const ran: string[] = [];
    f.bus.subscribe({
      name: "fails",
      pattern: { source: ["arbor.test"] },
      handler: async () => {
        ran.push("fails");
        throw new Error("boom");
      },
    });
    f.bus.subscribe({
      name: "works",
      pattern: { source: ["arbor.test"] },
      handler: async () => void ran.push("works"),
    });
    f.bus.subscribe({
      name: "other",
      pattern: { source: ["elsewhere"] },
      handler: async () => void ran.push("other"),
    });

    await expect(f.bus.dispatch(envelope())).rejects.toThrow("boom");
    expect(ran.sort()).toEqual(["fails", "works"]);

    ran.length = 0;
    await f.bus.dispatch(envelope(), { subscription: "works" });
    expect(ran).toEqual(["works"]);
  });

  it("dispatch hands over the publisher's id and the detail without the carrier key", async () => {
    f = await awsFixture();
    const got: BusEnvelope[] = [];
    f.bus.subscribe({
      name: "one",
      pattern: { detail: { taskId: ["t1"] } },
      handler: async (e) => void got.push(e),
    });
    await f.bus.dispatch(envelope({ detail: { taskId: "t1", [EVENT_ID_DETAIL_KEY]: "mine-1" } }));
    await f.bus.dispatch(envelope({ id: "foreign-1" }));
    expect(got.map((e) => [e.id, e.detail])).toEqual([
      ["mine-1", { taskId: "t1" }],
      ["foreign-1", { taskId: "t1" }],
    ]);
  });

  it("refuses to publish after close", async () => {
    f = await awsFixture();
    await f.bus.close();
    await expect(f.bus.publish([ev("late-1")])).rejects.toBeInstanceOf(UnavailableError);
  });
});

describe("EventBridge peer answers like EventBridge", () => {
  const client = () => sdkClient();

  it("rejects more than 10 entries with a ValidationException", async () => {
    const c = client();
    const entries = Array.from({ length: 11 }, () => ({ Source: "s", DetailType: "d", Detail: "{}" }));
    await expect(c.send(new PutEventsCommand({ Entries: entries }))).rejects.toMatchObject({
      name: "ValidationException",
      $fault: "client",
    });
    c.destroy();
  });

  it("rejects a request over 256 KiB with a ValidationException", async () => {
    const c = client();
    const Detail = JSON.stringify({ blob: "z".repeat(256 * 1024) });
    await expect(
      c.send(new PutEventsCommand({ Entries: [{ Source: "s", DetailType: "d", Detail }] })),
    ).rejects.toMatchObject({ name: "ValidationException" });
    c.destroy();
  });

  it("fails bad entries one by one and accepts the others", async () => {
    const c = client();
    const bus = uniqueBusName("raw");
    const out = await c.send(
      new PutEventsCommand({
        Entries: [
          { EventBusName: bus, DetailType: "d", Detail: "{}" },
          { EventBusName: bus, Source: "s", Detail: "{}" },
          { EventBusName: bus, Source: "s", DetailType: "d" },
          { EventBusName: bus, Source: "s", DetailType: "d", Detail: "[1]" },
          { EventBusName: bus, Source: "s", DetailType: "d", Detail: "{not json" },
          {
            EventBusName: bus,
            Source: "s",
            DetailType: "d",
            Detail: '{"ok":true}',
            Time: new Date("2024-01-02T03:04:05Z"),
          },
        ],
      }),
    );
    expect(out.FailedEntryCount).toBe(5);
    expect(out.Entries?.map((e) => e.ErrorCode ?? "ok")).toEqual([
      "InvalidArgument",
      "InvalidArgument",
      "InvalidArgument",
      "MalformedDetail",
      "MalformedDetail",
      "ok",
    ]);
    const [stored] = peer.eventsOn(bus);
    expect(stored).toEqual({
      version: "0",
      id: out.Entries?.[5]?.EventId,
      "detail-type": "d",
      source: "s",
      account: ACCOUNT,
      time: "2024-01-02T03:04:05Z",
      region: REGION,
      resources: [],
      detail: { ok: true },
    });
    c.destroy();
  });

  it("manages rules: invalid patterns, targets, deletion, listing with pagination", async () => {
    const c = client();
    const bus = uniqueBusName("rules");
    await expect(
      c.send(
        new PutRuleCommand({ Name: "bad", EventBusName: bus, EventPattern: '{"source":"not-an-array"}' }),
      ),
    ).rejects.toMatchObject({ name: "InvalidEventPatternException" });
    for (const name of ["r-a", "r-b", "r-c"]) {
      const { RuleArn } = await c.send(
        new PutRuleCommand({ Name: name, EventBusName: bus, EventPattern: '{"source":["s"]}' }),
      );
      expect(RuleArn).toBe(`arn:aws:events:${REGION}:${ACCOUNT}:rule/${bus}/${name}`);
    }
    await c.send(
      new PutTargetsCommand({
        Rule: "r-a",
        EventBusName: bus,
        Targets: [{ Id: "t", Arn: "arn:aws:lambda:x" }],
      }),
    );
    await expect(c.send(new DeleteRuleCommand({ Name: "r-a", EventBusName: bus }))).rejects.toMatchObject({
      name: "ValidationException",
    });
    await expect(
      c.send(
        new PutTargetsCommand({ Rule: "missing", EventBusName: bus, Targets: [{ Id: "t", Arn: "arn:x" }] }),
      ),
    ).rejects.toMatchObject({ name: "ResourceNotFoundException" });

    const page1 = await c.send(new ListRulesCommand({ EventBusName: bus, Limit: 2 }));
    expect(page1.Rules?.map((r) => r.Name)).toEqual(["r-a", "r-b"]);
    expect(page1.Rules?.[0]).toMatchObject({
      EventPattern: '{"source":["s"]}',
      State: "ENABLED",
      EventBusName: bus,
    });
    const page2 = await c.send(
      new ListRulesCommand({ EventBusName: bus, Limit: 2, NextToken: page1.NextToken }),
    );
    expect(page2.Rules?.map((r) => r.Name)).toEqual(["r-c"]);
    expect(page2.NextToken).toBeUndefined();

    await c.send(new RemoveTargetsCommand({ Rule: "r-a", EventBusName: bus, Ids: ["t"] }));
    for (const name of ["r-a", "r-b", "r-c"])
      await c.send(new DeleteRuleCommand({ Name: name, EventBusName: bus }));
    expect(peer.ruleNames(bus)).toEqual([]);
    c.destroy();
  });
});

describe("EventBridgeEventBus with command queues (SQS, the real client against the SQS peer)", () => {
  const READY = "TASK_READY";
  const TURN = "TURN_REQUESTED";
  let sqsPeer: SqsPeer;
  beforeAll(async () => {
    sqsPeer = await SqsPeer.start();
  });
  afterAll(async () => {
    await sqsPeer.close();
  });

  const setup = () => {
    const readyUrl = sqsPeer.createQueue(uniqueBusName("ready"));
    const turnUrl = sqsPeer.createQueue(uniqueBusName("turn"));
    const busName = uniqueBusName("commands");
    const sleeps: number[] = [];
    const queues = new SqsCommandQueues({
      client: sqsPeer.client(REGION),
      queues: {
        [READY]: { subscription: "ready", queueUrl: readyUrl },
        [TURN]: { subscription: "turn", queueUrl: turnUrl },
      },
      alsoOnBus: { detail: { turn: [1] } },
      account: ACCOUNT,
      region: REGION,
      sleep: async (ms) => {
        sleeps.push(ms);
      },
    });
    const bus = new EventBridgeEventBus({
      client: sdkClient(),
      eventBusName: busName,
      account: ACCOUNT,
      region: REGION,
      commands: queues,
    });
    return { bus, busName, readyUrl, turnUrl, sleeps };
  };
  const command = (detailType: string, n: number, detail: Record<string, unknown> = {}): BusEventInput => ({
    id: `${detailType}-${n}`,
    source: "arbor.engine",
    detailType,
    detail: { taskId: `cld:common.Tenant.acme/plan.Task.t${n}`, ...detail },
  });

  it("sends each command to its step's queue as the step's input, ten to a batch, and the rest on the bus", async () => {
    const { bus, busName, readyUrl, turnUrl } = setup();
    const readies = Array.from({ length: 12 }, (_, n) => command(READY, n));
    await bus.publish([...readies, command(TURN, 1, { turn: 2 }), command("RESOURCE_PUT", 1)]);
    // Nothing of the commands on the bus: only the resource event.
    expect(peer.eventsOn(busName).map((e) => e["detail-type"])).toEqual(["RESOURCE_PUT"]);
    const ready = sqsPeer.messages(readyUrl);
    expect(ready).toHaveLength(12);
    expect(ready.every((m) => m.attributes["arbor-message"]?.StringValue === COMMAND_MESSAGE_KIND)).toBe(
      true,
    );
    const input = JSON.parse(ready[0]?.body ?? "{}") as { subscription: string; event: BusEnvelope };
    // What the step function takes, as a rule's input transformer would have made it.
    expect(StepInputSchema.parse(input).subscription).toBe("ready");
    expect(input.event).toMatchObject({
      version: "0",
      "detail-type": READY,
      source: "arbor.engine",
      account: ACCOUNT,
      region: REGION,
      detail: { taskId: "cld:common.Tenant.acme/plan.Task.t0", [EVENT_ID_DETAIL_KEY]: `${READY}-0` },
    });
    // Two batches (ten and two): SendMessageBatch's limit.
    expect(sqsPeer.calls.filter((c) => c === "SendMessageBatch").length).toBeGreaterThanOrEqual(3);
    expect(sqsPeer.messages(turnUrl)).toHaveLength(1);

    // The step's bus hands it over as it would a rule's delivery: the publisher's id, the detail as published.
    const seen: BusEnvelope[] = [];
    bus.subscribe({
      name: "ready",
      pattern: { "detail-type": [READY] },
      handler: async (e) => {
        seen.push(e);
      },
    });
    await bus.dispatch(input.event, { subscription: "ready" });
    expect(seen.map((e) => [e.id, e.detail])).toEqual([
      [`${READY}-0`, { taskId: "cld:common.Tenant.acme/plan.Task.t0" }],
    ]);
    await bus.close();
  });

  it("puts a command a rule of the bus also takes (alsoOnBus) on both", async () => {
    const { bus, busName, turnUrl } = setup();
    await bus.publish([command(TURN, 7, { turn: 1 })]);
    expect(sqsPeer.messages(turnUrl)).toHaveLength(1);
    expect(peer.eventsOn(busName).map((e) => [e["detail-type"], e.detail[EVENT_ID_DETAIL_KEY]])).toEqual([
      [TURN, `${TURN}-7`],
    ]);
    await bus.close();
  });

  it("fails the publish, naming the queue, when SQS does not answer", async () => {
    const queues = new SqsCommandQueues({
      client: new SQSClient({
        region: REGION,
        endpoint: "http://127.0.0.1:9",
        credentials: { accessKeyId: "test", secretAccessKey: "test" },
        maxAttempts: 1,
      }),
      queues: { [READY]: { subscription: "ready", queueUrl: "http://127.0.0.1:9/000000000000/ready" } },
      region: REGION,
    });
    const bus = new EventBridgeEventBus({
      client: sdkClient(),
      eventBusName: uniqueBusName("down"),
      region: REGION,
      commands: queues,
    });
    await expect(bus.publish([command(READY, 1)])).rejects.toThrow(/SQS SendMessageBatch to .*ready failed/);
    await bus.close();
  });
});
