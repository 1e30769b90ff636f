import { type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openFollows } from "../../shared/notify/feed-follow.ts";
import {
  ANSWER,
  a2aClient,
  a2aScript,
  ada,
  intruder,
  partsText,
  rootOf,
  serveA2a,
  TEAM,
  userMessage,
} from "./a2a-fixtures.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { readSse, type SseEvent } from "./sse-client.ts";

/**
 * A2A streams from the request's feed (shared/channels/a2a/a2a-streams.ts), driven by the SDK's own
 * 1.0 client (sendMessageStream, resubscribeTask) against the endpoint on @hono/node-server: the
 * Task first, status updates on each change of the request's state, the artifact, the end; a
 * stream ends at input-required (the task is interrupted), and a client that comes back with
 * Last-Event-ID sees every event once.
 */
let h: Harness;
let served: Awaited<ReturnType<typeof serveA2a>>;
beforeAll(async () => {
  h = await Harness.create({ script: a2aScript(200), assistants: TEAM, settings: { electionThreshold: -1 } });
  served = await serveA2a(h.engine, { heartbeatMs: 200 });
});
afterAll(async () => {
  await served?.close();
  await h?.close();
});
afterEach(async () => {
  await h.idle();
});

const streamParams = (text: string) => ({
  tenant: "",
  message: userMessage(text),
  configuration: undefined,
  metadata: undefined,
});
const stateOf = (r: StreamResponse) =>
  r.payload?.$case === "statusUpdate"
    ? r.payload.value.status?.state
    : r.payload?.$case === "task"
      ? r.payload.value.status?.state
      : undefined;

async function rpcStream(
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  until?: (events: SseEvent[]) => boolean,
) {
  return readSse(`${served.url}/a2a`, {
    headers: {
      authorization: `Bearer ${ada.key}`,
      "content-type": "application/json",
      "a2a-version": "1.0",
      ...headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 11, ...body }),
    method: "POST",
    ...(until ? { until } : {}),
  });
}

describe("SendStreamingMessage and SubscribeToTask (1.0, the SDK's client)", () => {
  it("sendMessageStream: the Task, working, then the artifact and completed, and the stream ends", async () => {
    const c = await a2aClient(ada.key, served.url);
    const seen: StreamResponse[] = [];
    // Answered after a moment (as a model does): the stream sees the task before it ends.
    for await (const r of c.sendMessageStream(streamParams("What is the cost per person, slowly?")))
      seen.push(r);
    expect(seen[0]?.payload?.$case).toBe("task");
    const task = seen[0]?.payload?.value as Task;
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    const artifact = seen.find((r) => r.payload?.$case === "artifactUpdate");
    expect(
      artifact?.payload?.$case === "artifactUpdate" && partsText(artifact.payload.value.artifact?.parts),
    ).toBe(ANSWER);
    expect(stateOf(seen.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_COMPLETED);
    for (const r of seen.slice(1))
      expect(r.payload?.$case === "task" ? r.payload.value.id : r.payload?.value).toMatchObject({
        taskId: task.id,
      });
    const got = await c.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(openFollows()).toBe(0);
  });

  it("input-required ends the stream with the question (the task is interrupted); the answer, sent as a stream, follows it to the end", async () => {
    // The A2A kit's STREAM-SUB-002 and CORE-EXECUTION-MODE-001: a stream ends where the task is
    // terminal or interrupted (input-required); the client answers and follows again.
    const c = await a2aClient(ada.key, served.url);
    const seen: StreamResponse[] = [];
    for await (const r of c.sendMessageStream(streamParams("Email the team about the offsite"))) seen.push(r);
    const task = (seen[0] as { payload: { value: Task } }).payload.value;
    const question = seen.at(-1) as StreamResponse;
    expect(stateOf(question)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED); // the last event: the stream ended there
    const said =
      question.payload?.$case === "statusUpdate" ? question.payload.value.status?.message : undefined;
    expect(partsText(said?.parts)).toMatch(/Answer with one of: approve \(Allow\), deny \(Deny\)\.$/);
    expect(openFollows()).toBe(0);

    // Subscribed while it waits: the Task as it stands, waiting for the answer, and the stream ends.
    const waiting: StreamResponse[] = [];
    for await (const r of c.resubscribeTask({ tenant: "", id: task.id })) waiting.push(r);
    expect(waiting.map((r) => r.payload?.$case)).toEqual(["task"]);
    expect(stateOf(waiting[0] as StreamResponse)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);

    // The answer, as a streaming message on the task: the task goes on, to its end.
    const rest: StreamResponse[] = [];
    for await (const r of c.sendMessageStream({
      ...streamParams(""),
      message: userMessage("approve", { taskId: task.id, contextId: task.contextId }),
    }))
      rest.push(r);
    expect(rest[0]?.payload?.$case).toBe("task");
    expect(stateOf(rest.at(-1) as StreamResponse)).toBe(TaskState.TASK_STATE_COMPLETED);
    const artifact = rest.find((r) => r.payload?.$case === "artifactUpdate");
    expect(
      artifact?.payload?.$case === "artifactUpdate" && partsText(artifact.payload.value.artifact?.parts),
    ).toMatch(/^Emailed the team: /);
  });

  it("a client that reconnects with Last-Event-ID sees every event of the stream once", async () => {
    const c = await a2aClient(ada.key, served.url);
    let task: Task | undefined;
    for await (const r of c.sendMessageStream(streamParams("Email the team about the offsite")))
      if (r.payload?.$case === "task") task = r.payload.value;
    const id = (task as Task).id;
    const subscribe = (lastEventId: string, until?: (events: SseEvent[]) => boolean) =>
      rpcStream({ method: "SubscribeToTask", params: { id } }, { "last-event-id": lastEventId }, until);
    const stateIn = (e: SseEvent) => {
      const result = (
        JSON.parse(e.data) as { id: number; result: Record<string, { status?: { state: string } }> }
      ).result;
      return result.statusUpdate?.status?.state ?? (result.artifactUpdate ? "artifact" : "task");
    };
    // From before the feed's first entry: until the question, where the stream ends (interrupted).
    const first = await subscribe("0");
    expect(first.status).toBe(200);
    expect(first.ended).toBe(true);
    for (const e of first.events) expect(JSON.parse(e.data)).toMatchObject({ jsonrpc: "2.0", id: 11 });
    const [pending] = await h.pending(rootOf(task as Task));
    await h.engine.respond(pending?.meta.id as string, { selectedOptionId: "approve" }, PERSON, {
      tenant: "acme",
      roles: [],
    });
    // Back with the last id it has: the rest, to the end.
    const second = await subscribe(first.events.at(-1)?.id as string);
    expect(second.ended).toBe(true);
    const union = [...first.events, ...second.events];
    const ids = union.map((e) => e.id as string);
    expect(new Set(ids).size).toBe(ids.length);
    expect(union.map(stateIn)).toEqual([
      "TASK_STATE_INPUT_REQUIRED",
      "TASK_STATE_WORKING",
      "artifact",
      "TASK_STATE_COMPLETED",
    ]);
    // The artifact and the completed status come from one feed entry: <seq>.1 and <seq>.2.
    expect(ids.slice(-2)).toEqual([`${ids.at(-1)?.split(".")[0]}.1`, `${ids.at(-1)?.split(".")[0]}.2`]);
    // Replayed whole after the end, the stream is the same events, ids, times and message ids
    // (the question answered since, it runs through): nothing twice, nothing new.
    const again = await subscribe("0");
    expect(again.events.map((e) => e.id)).toEqual(ids);
    expect(again.events.map(stateIn)).toEqual(union.map(stateIn));
    const results = (events: SseEvent[]) =>
      events.map((e) => (JSON.parse(e.data) as { result: unknown }).result);
    expect(results(again.events)).toEqual(results(union));
    // Resumed between the artifact and the completed status: only the status.
    const last = await subscribe(ids.at(-2) as string);
    expect(last.events.map((e) => e.id)).toEqual([ids.at(-1)]);
  });

  it("a task canceled while it streams ends its stream canceled, with the reason", async () => {
    const c = await a2aClient(ada.key, served.url);
    const seen: StreamResponse[] = [];
    for await (const r of c.sendMessageStream(streamParams("Compute the cost slowly"))) {
      seen.push(r);
      if (r.payload?.$case === "task") await cancelOncePlanned(c, r.payload.value.id);
    }
    const last = seen.at(-1) as StreamResponse;
    expect(stateOf(last)).toBe(TaskState.TASK_STATE_CANCELED);
    const said = last.payload?.$case === "statusUpdate" ? last.payload.value.status?.message : undefined;
    expect(partsText(said?.parts)).toMatch(/canceled over A2A/);
  });

  it("refuses another tenant's task (not found) and a Last-Event-ID it never sent", async () => {
    const c = await a2aClient(ada.key, served.url);
    const seen: StreamResponse[] = [];
    for await (const r of c.sendMessageStream(streamParams("What is the cost per person?"))) seen.push(r);
    const id = (seen[0] as { payload: { value: Task } }).payload.value.id;
    const other = await a2aClient(intruder.key, served.url);
    await expect(async () => {
      for await (const _ of other.resubscribeTask({ tenant: "", id })) break;
    }).rejects.toThrow(/not found/i);
    const bad = await rpcStream({ method: "SubscribeToTask", params: { id } }, { "last-event-id": "x1" });
    expect(JSON.parse(bad.body)).toMatchObject({
      id: 11,
      error: { message: expect.stringMatching(/Last-Event-ID "x1"/) },
    });
    // An ended task without Last-Event-ID: read it with GetTask.
    await expect(async () => {
      for await (const _ of c.resubscribeTask({ tenant: "", id })) break;
    }).rejects.toThrow(/has ended/);
  });
});

/**
 * A cancel that comes before the request is planned is refused ("accepted and not planned yet:
 * cancel it again in a moment"), as a caller is told: do what the message says.
 */
async function cancelOncePlanned(c: Awaited<ReturnType<typeof a2aClient>>, id: string): Promise<void> {
  for (;;) {
    try {
      await c.cancelTask({ tenant: "", id, metadata: undefined });
      return;
    } catch (e) {
      if (!/not planned yet/.test(String((e as Error).message))) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
