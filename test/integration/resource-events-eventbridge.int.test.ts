import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DeleteRuleCommand,
  EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventBridgeEventBus } from "../../shared/adapters/aws/eventbridge-event-bus.ts";
import { SqliteDatabase } from "../../shared/adapters/local/sqlite-database.ts";
import { SqliteObjectStore } from "../../shared/adapters/local/sqlite-object-store.ts";
import { EVENT_ID_DETAIL_KEY } from "../../shared/adapters/shared/bus-envelope.ts";
import { eventIdFor } from "../../shared/domain/events.ts";
import { withMeta } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { BusAnnouncer, resourceEvent } from "../../shared/store/resource-events.ts";
import { ResourceStore } from "../../shared/store/resource-store.ts";
import { EventBridgePeer } from "../peers/eventbridge-peer.ts";

/**
 * The AWS way to follow resources by URN prefix: an operator's EventBridge rule on Arbor's bus,
 *   {"source":["arbor"],"detail-type":["RESOURCE_PUT","RESOURCE_DELETE"],"resources":[{"prefix":"cld:common.Tenant.acme/"}]}
 * with a target of their own (here an HTTP receiver standing in for a queue or an API destination).
 * The resource store announces through the EventBridge adapter with the real SDK client, against
 * the EventBridge peer, which routes by the same matcher as EventBridge's documented semantics.
 */
const ACCOUNT = "123456789012";
const REGION = "eu-west-1";
const BUS = `arbor-resource-events-${process.pid}`;
const ACME = tenantUrn("acme");

let peer: EventBridgePeer;
let client: EventBridgeClient;
let bus: EventBridgeEventBus;
let receiver: Server;
let receiverUrl: string;
const received: {
  id: string;
  "detail-type": string;
  resources: string[];
  detail: Record<string, unknown>;
}[] = [];
let dir: string;
let database: SqliteDatabase;
let store: ResourceStore;

beforeAll(async () => {
  peer = new EventBridgePeer({ account: ACCOUNT });
  const { endpoint } = await peer.start();
  client = new EventBridgeClient({
    endpoint,
    region: REGION,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  bus = new EventBridgeEventBus({ client, eventBusName: BUS, account: ACCOUNT, region: REGION });
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", () => resolve()));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/acme-resources`;
  dir = await mkdtemp(join(tmpdir(), "arbor-resource-events-eb-"));
  database = new SqliteDatabase({ path: join(dir, "arbor.db"), durable: false });
  store = new ResourceStore(new SqliteObjectStore({ database }), { announcer: new BusAnnouncer(bus) });
});

afterAll(async () => {
  await bus?.close();
  client?.destroy();
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  await peer?.stop();
  await database?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("an operator's EventBridge rule by `resources` prefix", () => {
  it("receives the tenant's puts and deletes, and nothing of another tenant or a look-alike", async () => {
    await client.send(
      new PutRuleCommand({
        Name: "acme-resources",
        EventBusName: BUS,
        EventPattern: JSON.stringify({
          source: ["arbor"],
          "detail-type": ["RESOURCE_PUT", "RESOURCE_DELETE"],
          resources: [{ prefix: `${ACME}/` }],
        }),
      }),
    );
    await client.send(
      new PutTargetsCommand({
        Rule: "acme-resources",
        EventBusName: BUS,
        Targets: [{ Id: "operator", Arn: receiverUrl }],
      }),
    );

    const conversation = withMeta({ type: "common.Conversation", name: "c1", id: "c1", parent: ACME });
    const message = withMeta({ type: "common.Message", name: "m1", id: "m1", parent: conversation.id });
    const task = withMeta({ type: "plan.Task", name: "Offsite", parent: message.id });
    const turn = withMeta({ type: "common.Message", name: "turn-1", parent: task.id });
    const beta = withMeta({ type: "common.Conversation", name: "c1", id: "c1", parent: tenantUrn("beta") });
    const acme2 = withMeta({ type: "common.Conversation", name: "c1", id: "c1", parent: tenantUrn("acme2") });

    const put = await Promise.all([
      store.put({ meta: conversation, startedBy: "user_ada" }),
      store.put({ meta: message, role: "user", content: "Plan our offsite" }),
      store.put({ meta: task, priority: "normal" }),
      store.put({ meta: turn, role: "assistant", content: "thinking" }), // transcript: not announced
      store.put({ meta: beta, startedBy: "user_bea" }),
      store.put({ meta: acme2, startedBy: "user_x" }),
    ]);
    // The engine's output announcement goes through the same bus, with the same shape.
    const output = withMeta({ type: "common.Message", name: "output", parent: task.id });
    const written = await store.put({ meta: output, role: "assistant", content: "done" });
    await bus.publish([
      resourceEvent("RESOURCE_PUT", {
        urn: written.urn,
        resourceType: "common.Message",
        name: "output",
        contentHash: written.contentHash,
      }),
    ]);
    expect(await store.delete(message.id)).toBe(true);
    expect(await store.delete(`${ACME}/common.Conversation.never`)).toBe(false);
    await peer.idle();

    // What reached the bus: every announced write (beta's and acme2's too), no transcript.
    const onBus = peer.eventsOn(BUS);
    expect(onBus.map((e) => e.detail.name).sort()).toEqual([
      "Offsite",
      "c1",
      "c1",
      "c1",
      "m1",
      "m1",
      "output",
    ]);
    // What the operator's rule delivered: acme's only, each with its deterministic id.
    const got = received.map((e) => [e["detail-type"], e.detail.urn]);
    expect(got.sort()).toEqual(
      [
        ["RESOURCE_PUT", conversation.id],
        ["RESOURCE_PUT", message.id],
        ["RESOURCE_PUT", task.id],
        ["RESOURCE_PUT", output.id],
        ["RESOURCE_DELETE", message.id],
      ].sort(),
    );
    for (const e of received) {
      expect(e.resources).toEqual([e.detail.urn]);
      expect(e.detail.tenant).toBe("acme");
      expect(e.detail[EVENT_ID_DETAIL_KEY]).toBe(
        eventIdFor(e["detail-type"], e.detail.urn as string, e.detail.contentHash as string),
      );
    }
    expect(put[0]?.contentHash).toBe(
      received.find((e) => e.detail.urn === conversation.id && e["detail-type"] === "RESOURCE_PUT")?.detail
        .contentHash,
    );

    await client.send(
      new RemoveTargetsCommand({ Rule: "acme-resources", EventBusName: BUS, Ids: ["operator"] }),
    );
    await client.send(new DeleteRuleCommand({ Name: "acme-resources", EventBusName: BUS }));
  });
});
