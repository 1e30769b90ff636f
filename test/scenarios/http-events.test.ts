// The `eventsource` package (3.0.7) comes with the MCP SDK: an EventSource as browsers have it, for Node.
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { feedStreamOf } from "../../shared/notify/feed.ts";
import { openFollows } from "../../shared/notify/feed-follow.ts";
import { until } from "../support/until.ts";
import { Harness } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";
import { readSse, type SseEvent } from "./sse-client.ts";

/**
 * GET /v1/tasks/:urn/events as server-sent events over real HTTP (`arbor serve`'s live mode): a
 * client that goes away mid-run and comes back with Last-Event-ID sees every event of the
 * request's feed exactly once; a subtask's stream is its part of the root's; the checks of the
 * JSON route; a heartbeat while nothing happens; nothing left running once a client has gone.
 */
const carl = newApiKey({ id: "user_carl", kind: "human", tenant: "acme", roles: [] });
let gate: { open: () => void; opened: Promise<void> };
const newGate = () => {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
};
const script: ScriptFunction = async (r) => {
  if (isPlan(r))
    return planOf({
      name: "Offsite",
      purpose: "Plan the offsite",
      subtasks: [
        {
          name: "Venue",
          purpose: "Find a venue",
          subtasks: [
            { name: "Lisbon", purpose: "Check Lisbon" },
            { name: "Porto", purpose: "Check Porto" },
          ],
        },
        { name: "Agenda", purpose: "Write the agenda" },
      ],
    });
  if (isEvaluation(r)) return pass();
  if (taskName(r) === "Lisbon") await gate.opened; // the run holds here until the test lets it go
  return { content: `done: ${taskName(r)}` };
};

let h: Harness;
let server: RunningServer;
beforeAll(async () => {
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, carl.entry] }),
    events: { heartbeatMs: 200, recheckMs: 100, retryMs: 50 },
  });
});
afterAll(async () => {
  gate?.open();
  await server?.close();
  await h?.close();
});

const eventsUrl = (urn: string, query = "") =>
  `${server.url}/v1/tasks/${encodeURIComponent(urn)}/events${query}`;
const auth = (key: string) => ({ authorization: `Bearer ${key}` });
async function submit(text: string): Promise<string> {
  const res = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { ...auth(acme.key), "content-type": "application/json" },
    body: JSON.stringify({ text }),
  });
  return ((await res.json()) as { rootTaskId: string }).rootTaskId;
}
const feedEvents = (e: SseEvent[]) => e.filter((x) => x.event !== "end");
const data = (e: SseEvent) =>
  JSON.parse(e.data) as { seq: number; type: string; payload: { taskId: string } };
describe("GET /v1/tasks/:urn/events, Accept: text/event-stream", () => {
  let root = "";

  it("a client that disconnects mid-run and resumes with Last-Event-ID sees every event once", async () => {
    gate = newGate();
    root = await submit("Plan the offsite");
    // First connection: until the run has begun (the root and its first children), then gone.
    const first = await readSse(eventsUrl(root), {
      headers: auth(acme.key),
      until: (events) => events.filter((e) => e.event === "TaskStarted").length >= 3,
    });
    expect(first.status).toBe(200);
    expect(first.contentType).toMatch(/^text\/event-stream/);
    expect(first.ended).toBe(false);
    expect(first.retry).toBeGreaterThan(0);
    // Nothing stays behind the client that went: no bus subscription, no timer.
    await until("every follow to close", () => openFollows() === 0);
    expect(openFollows()).toBe(0);

    // Meanwhile the run goes on (Lisbon is let go), and the client comes back where it left.
    gate.open();
    const lastId = first.events.at(-1)?.id as string;
    const second = await readSse(eventsUrl(root), {
      headers: { ...auth(acme.key), "last-event-id": lastId },
    });
    expect(second.status).toBe(200);
    expect(second.ended).toBe(true);
    expect(second.events.at(-1)).toMatchObject({ event: "end" });

    const seen = [...feedEvents(first.events), ...feedEvents(second.events)];
    const feed = await h.rt.state.readStream(feedStreamOf(root));
    expect(feed.length).toBeGreaterThan(10);
    expect(seen.map((e) => Number(e.id))).toEqual(feed.map((e) => e.seq)); // every one, once, in order
    expect(seen.map((e) => e.event)).toEqual(feed.map((e) => e.type));
    expect(seen.map((e) => data(e).seq)).toEqual(feed.map((e) => e.seq));
    // The whole tree: five tasks, each created and completed.
    const completed = seen.filter((e) => e.event === "TaskCompleted").map((e) => data(e).payload.taskId);
    expect(new Set(completed).size).toBe(5);
    expect(completed.at(-1)).toBe(root); // the root ends last, even when its children end in the same millisecond
    await until("every follow to close", () => openFollows() === 0);
    expect(openFollows()).toBe(0);
  });

  it("after the end, a reconnect is told 204 (an EventSource stops); a subtask's stream is its part of the feed", async () => {
    const all = await readSse(eventsUrl(root), { headers: auth(acme.key) });
    const lastId = feedEvents(all.events).at(-1)?.id as string;
    const again = await readSse(eventsUrl(root), { headers: { ...auth(acme.key), "last-event-id": lastId } });
    expect(again.status).toBe(204);

    // A subtask's stream (the first created below the root: a branch or a leaf).
    const venueUrn = feedEvents(all.events)
      .map(data)
      .find((e) => e.type === "TaskCreated" && e.payload.taskId !== root)?.payload.taskId as string;
    const part = await readSse(eventsUrl(venueUrn), { headers: auth(acme.key) });
    const events = feedEvents(part.events);
    expect(events.length).toBeGreaterThan(0);
    const ids = events.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b)); // the root feed's ids, in order
    for (const e of events) expect(data(e).payload.taskId.startsWith(venueUrn)).toBe(true);
    const expected = feedEvents(all.events).filter((e) => data(e).payload.taskId.startsWith(venueUrn));
    expect(events.map((e) => e.id)).toEqual(expected.map((e) => e.id));
    // Resumed in the middle, through the query (clients that cannot set headers).
    const mid = ids[Math.floor(ids.length / 2)] as number;
    const rest = await readSse(eventsUrl(venueUrn, `?lastEventId=${mid}`), { headers: auth(acme.key) });
    expect(feedEvents(rest.events).map((e) => Number(e.id))).toEqual(ids.filter((i) => i > mid));
  });

  it("keeps the JSON route's checks and refuses a Last-Event-ID it never sent", async () => {
    const sse = (key: string, urn: string, headers: Record<string, string> = {}, query = "") =>
      readSse(eventsUrl(urn, query), { headers: { ...auth(key), ...headers } });
    const other = await sse(beta.key, root);
    expect(other.status).toBe(404);
    expect(JSON.parse(other.body)).toMatchObject({ error: { code: "NOT_FOUND" } });
    expect((await sse(carl.key, root)).status).toBe(403);
    expect((await sse("nope", root)).status).toBe(401);
    for (const bad of ["abc", "-1", "1.5", "12abc", "99999999999999999999"]) {
      const res = await sse(acme.key, root, { "last-event-id": bad });
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body).error.message).toMatch(
        /Last-Event-ID .* send the id of the last event you received/,
      );
    }
    const past = await sse(acme.key, root, { "last-event-id": "100000" });
    expect(past.status).toBe(400);
    expect(JSON.parse(past.body).error.message).toMatch(/past the end of this stream/);
    const query = await sse(acme.key, root, {}, "?fromSeq=2");
    expect(query.status).toBe(400);
    expect(JSON.parse(query.body).error.message).toMatch(/only \?lastEventId/);
    // The JSON answer on the same path is as it was.
    const json = await fetch(eventsUrl(root), { headers: auth(acme.key) });
    expect(json.headers.get("content-type")).toMatch(/application\/json/);
    expect(((await json.json()) as { taskId: string }).taskId).toBe(root);
  });

  it("an EventSource (the `eventsource` package) whose connection drops mid-run reconnects by itself and sees every event once", async () => {
    gate = newGate();
    const urn = await submit("Plan the offsite once more");
    let connections = 0;
    const lastEventIds: (string | null)[] = [];
    // The network: the key on every request, and the first connection lost after a few chunks.
    const flaky: typeof fetch = async (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("authorization", `Bearer ${acme.key}`);
      lastEventIds.push(headers.get("last-event-id"));
      const res = await fetch(input, { ...init, headers });
      if (++connections > 1 || !res.body) return res;
      const reader = res.body.getReader();
      let chunks = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await reader.read();
          if (done) return controller.close();
          controller.enqueue(value);
          if (++chunks === 4) {
            await reader.cancel();
            gate.open(); // the run goes on while the client is away
            controller.error(new Error("connection lost"));
          }
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const seen: { id: string; type: string }[] = [];
    const source = new EventSource(eventsUrl(urn), { fetch: flaky });
    const types = ["TaskCreated", "TaskStarted", "TaskCompleted", "TaskFailed", "TaskCanceled", "end"];
    const closed = new Promise<void>((resolve) => {
      for (const type of types)
        source.addEventListener(type, (e) => seen.push({ id: (e as MessageEvent).lastEventId, type }));
      // After the end the server answers the reconnect 204, and an EventSource stops for good.
      source.onerror = () => {
        if (source.readyState === source.CLOSED) resolve();
      };
    });
    await closed;
    source.close();
    expect(connections).toBeGreaterThanOrEqual(3); // the first, the reconnect after the drop, the 204
    expect(lastEventIds[0]).toBeNull();
    expect(lastEventIds[1]).not.toBeNull();
    const events = seen.filter((e) => e.type !== "end");
    const feed = await h.rt.state.readStream(feedStreamOf(urn));
    expect(events.map((e) => Number(e.id))).toEqual(feed.map((e) => e.seq));
    expect(events.map((e) => e.type)).toEqual(feed.map((e) => e.type));
    expect(seen.at(-1)?.type).toBe("end");
  });

  it("a subtask's stream ends once that subtask's part is over, while the request still runs", async () => {
    gate = newGate();
    const urn = await submit("Plan the offsite, part by part");
    type Created = { type: string; payload: { taskId: string; title?: string } };
    // The root's stream until the Agenda (a leaf nobody holds) has completed; Lisbon is held meanwhile.
    let agenda = "";
    await readSse(eventsUrl(urn), {
      headers: auth(acme.key),
      until: (events) => {
        const parsed = feedEvents(events).map((e) => JSON.parse(e.data) as Created);
        agenda ||=
          parsed.find((e) => e.type === "TaskCreated" && e.payload.title === "Agenda")?.payload.taskId ?? "";
        return parsed.some((e) => e.type === "TaskCompleted" && e.payload.taskId === agenda);
      },
    });
    const part = await readSse(eventsUrl(agenda), { headers: auth(acme.key) });
    expect(part.ended).toBe(true);
    expect(part.events.at(-1)).toMatchObject({ event: "end" });
    expect(feedEvents(part.events).map((e) => e.event)).toEqual([
      "TaskCreated",
      "TaskStarted",
      "TaskCompleted",
    ]);
    expect((await h.engine.result(urn)).view?.status).not.toBe("done"); // the request goes on
    gate.open();
  });

  it("sends a heartbeat while the request waits, and lets go of everything when the client does", async () => {
    gate = newGate();
    const waiting = await submit("Plan the offsite again");
    const read = await readSse(eventsUrl(waiting), {
      headers: auth(acme.key),
      until: (_events, comments) => comments.includes("heartbeat"),
    });
    expect(read.comments).toContain("heartbeat");
    await until("every follow to close", () => openFollows() === 0);
    expect(openFollows()).toBe(0);
    gate.open();
  });
});
