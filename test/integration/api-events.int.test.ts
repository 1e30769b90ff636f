import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import type { TaskEvent } from "../../shared/domain/events.ts";
import { withMeta } from "../../shared/domain/resources.ts";
import { tenantUrn, type Urn } from "../../shared/domain/urn.ts";
import { outputMeta } from "../../shared/engine/steps/outcome.ts";
import { feedStreamOf } from "../../shared/notify/feed.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { taskCompleted, taskCreated, taskStarted } from "../fixtures/event-builders.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import { type AwsWorld, apiGuard, guarded, startAwsWorld } from "./aws-world.ts";

/**
 * The event stream of the HTTP API through the API function, as API Gateway's HTTP API invokes it
 * (payload format 2.0, a response buffered whole): "bounded" mode answers with what the feed holds
 * beyond Last-Event-ID, or else with what arrives within a short wait, with `retry:`, so that an
 * EventSource reconnecting round after round sees every event once; the end says so, and a
 * reconnect after it is a 204. No bus delivers to the API function: it reconciles the feed from
 * DynamoDB itself.
 */
const admin = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const other = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: ["admin"] });

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  retry?: number;
}
function frames(body: string): Frame[] {
  return body
    .split("\n\n")
    .filter((b) => b.trim() !== "" && !b.startsWith(":"))
    .map((block) => {
      const f: Frame = {};
      for (const line of block.split("\n")) {
        const at = line.indexOf(": ");
        const [k, v] = [line.slice(0, at), line.slice(at + 2)];
        if (k === "id" || k === "event" || k === "data") f[k] = v;
        if (k === "retry") f.retry = Number(v);
      }
      return f;
    });
}

describe("the API function's event streams (bounded: API Gateway buffers a response)", () => {
  let world: AwsWorld;
  let rt: AwsRuntime;
  let handler: ApiHandler;
  const conversation = withMeta({ type: "common.Conversation", name: "c", parent: tenantUrn("acme") });
  const message = withMeta({ type: "common.Message", name: "m", parent: conversation.id });
  const root = withMeta({ type: "plan.Task", name: "root", parent: message.id }).id;
  const child = withMeta({ type: "plan.Task", name: "child", parent: root }).id;

  const stream = async (urn: string, options: { lastEventId?: string; key?: string } = {}) => {
    const event: APIGatewayProxyEventV2 = apiEvent("GET", `/v1/tasks/${encodeURIComponent(urn)}/events`, {
      key: options.key ?? admin.key,
      headers: {
        accept: "text/event-stream",
        ...(options.lastEventId ? { "last-event-id": options.lastEventId } : {}),
      },
    });
    const res = await handler(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return { status: res.statusCode, headers: (res.headers ?? {}) as Record<string, string>, body };
  };
  const record = async (event: TaskEvent) => {
    if (event.type === "TaskCreated") await rt.objects.put(`${event.payload.taskId}.json`, "{}");
    await rt.tasks.record(event);
  };

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-api-events",
      bus: "arbor-api-events",
      env: { ARBOR_TENANT: "acme", ARBOR_PUBLIC_URL: PUBLIC_URL },
    });
    rt = createAwsRuntime(world.config, world.clients);
    const keys = new StateKeyStore(rt.state);
    for (const k of [admin, other]) await keys.add(k.entry);
    await rt.resources.put({ meta: conversation, startedBy: admin.entry.id });
    handler = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => world.config,
        clients: world.clients,
        engine: { clients: world.engineClients },
        eventStreams: { maxWaitMs: 400, recheckMs: 50 },
      }),
    );
  });
  afterAll(async () => {
    await handler?.close();
    await rt?.close();
    await world?.close();
  });

  it("answers in rounds that together hold every event once, then ends, then says 204", async () => {
    await record(taskCreated(root as Urn));
    await record(taskStarted(root as Urn));
    await record(taskCreated(child as Urn, { parentTaskId: root as Urn }));
    await record(taskStarted(child as Urn));

    // Round 1: what is there, at once.
    const first = await stream(root);
    expect(first.status).toBe(200);
    expect(first.headers["content-type"]).toMatch(/^text\/event-stream/);
    const one = frames(first.body);
    expect(one[0]?.retry).toBe(1000);
    const events1 = one.filter((f) => f.id);
    expect(events1.map((f) => f.event)).toEqual(["TaskCreated", "TaskStarted", "TaskCreated", "TaskStarted"]);

    // Round 2: nothing new within the wait: an answer with no event, the client asks again.
    const second = await stream(root, { lastEventId: events1.at(-1)?.id as string });
    expect(second.status).toBe(200);
    expect(frames(second.body).filter((f) => f.id)).toEqual([]);

    // Round 3: the request ends meanwhile: the rest, and the end.
    await record(taskCompleted(child as Urn));
    await record(taskCompleted(root as Urn));
    const third = await stream(root, { lastEventId: events1.at(-1)?.id as string });
    const three = frames(third.body);
    const events3 = three.filter((f) => f.id);
    expect(events3.map((f) => f.event)).toEqual(["TaskCompleted", "TaskCompleted"]);
    expect(three.at(-1)).toMatchObject({ event: "end" });

    const seen = [...events1, ...events3].map((f) => Number(f.id));
    const feed = await rt.state.readStream(feedStreamOf(root));
    expect(seen).toEqual(feed.map((e) => e.seq));
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);

    // Over, and nothing after the last id: 204, which stops an EventSource.
    expect((await stream(root, { lastEventId: "6" })).status).toBe(204);
    // A subtask's stream: its own events, with the root feed's ids.
    const part = frames((await stream(child)).body).filter((f) => f.id);
    expect(part.map((f) => f.id)).toEqual(["3", "4", "5"]);
  });

  it("keeps the checks: another tenant's task is 404, a bad Last-Event-ID is 400", async () => {
    const foreign = await stream(root, { key: other.key });
    expect(foreign.status).toBe(404);
    const bad = await stream(root, { lastEventId: "four" });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).error.message).toMatch(/Last-Event-ID "four" is not an id this stream sends/);
  });

  it("A2A streams come in rounds too: SendStreamingMessage, then SubscribeToTask with Last-Event-ID to the end", async () => {
    const rpc = async (body: Record<string, unknown>, lastEventId?: string) => {
      const res = await handler(
        apiEvent("POST", "/a2a", {
          key: admin.key,
          headers: { "a2a-version": "1.0", ...(lastEventId ? { "last-event-id": lastEventId } : {}) },
          body: { jsonrpc: "2.0", id: 5, ...body },
        }),
        { awsRequestId: randomUUID() },
      );
      const text = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
      const headers = (res.headers ?? {}) as Record<string, string>;
      return {
        status: res.statusCode,
        headers,
        events: frames(text)
          .filter((f) => f.data)
          .map((f) => ({
            sseId: f.id,
            ...(JSON.parse(f.data as string) as { id: number; result: unknown }),
          })),
      };
    };
    // No engine runs behind the API function here: the request stays accepted, and the test plays the engine.
    const sent = await rpc({
      method: "SendStreamingMessage",
      params: {
        message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "Plan the offsite" }] },
      },
    });
    expect(sent.status).toBe(200);
    expect(sent.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(Object.keys(sent.headers).map((h) => h.toLowerCase())).not.toContain("transfer-encoding");
    const [ack] = sent.events;
    // The request is recorded, not planned yet: the stream opens with the Task submitted.
    expect(ack).toMatchObject({
      sseId: "0",
      id: 5,
      result: { task: { status: { state: "TASK_STATE_SUBMITTED" } } },
    });
    const acked = ack as { result: { task: { id: string; metadata: { arbor: { rootTaskId: string } } } } };
    const a2aTask = acked.result.task;
    const rootTaskId = a2aTask.metadata.arbor.rootTaskId as Urn;

    await record(taskCreated(rootTaskId));
    await record(taskStarted(rootTaskId));
    // Nothing the caller would see changed (it is working): the round ends empty after the wait.
    const quiet = await rpc({ method: "SubscribeToTask", params: { id: a2aTask.id } }, "0");
    expect(quiet.status).toBe(200);
    expect(quiet.events).toEqual([]);

    await rt.resources.put({ meta: outputMeta(rootTaskId), role: "assistant", content: "Lisbon, in June." });
    await record(taskCompleted(rootTaskId));
    const end = await rpc({ method: "SubscribeToTask", params: { id: a2aTask.id } }, "0");
    expect(end.events.map((e) => e.sseId)).toEqual(["3.1", "3.2"]);
    expect(end.events[0]).toMatchObject({
      id: 5,
      result: { artifactUpdate: { artifact: { parts: [{ text: "Lisbon, in June." }] } } },
    });
    expect(end.events[1]).toMatchObject({
      result: { statusUpdate: { status: { state: "TASK_STATE_COMPLETED" } } },
    });
  });
});
