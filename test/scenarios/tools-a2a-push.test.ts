import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { type RemoteCall, waitsOnRemote } from "../../shared/engine/turn/remote-calls.ts";
import type { ToolContext } from "../../shared/ports/tools.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { type A2aAgentPeer, startA2aAgent } from "../peers/a2a-agent.ts";
import { keys } from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED, openToolWorld } from "./tool-world.ts";

/**
 * Arbor as an A2A client of an agent that offers push (test/peers/a2a-agent.ts, `push: true`): a
 * long remote task does not hold the leaf's turn. The call goes out with `returnImmediately` and a
 * push config naming Arbor's public URL (`/v1/a2a-callbacks/<id>`, a fresh token); the agent
 * answers "working", the turn ends with nothing running, and the agent's push (to Arbor's real
 * HTTP server, the route mounted in the server app) resumes the leaf. Without a push, the deadline
 * settles it with one GetTask. Everything goes out through the outbound guard (loopback allowed).
 */
const TIMEOUT_MS = 5_000;
const ORGANISER: AssistantDefinition[] = [
  { name: "Organiser", id: "organiser", purpose: "Find venues for team events", tools: ["venue_desk"] },
];
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Find a venue", purpose: "Find a venue in Lisbon for 12 people" });
  if (isEvaluation(r)) return pass("done");
  const answers = r.messages.filter((m) => m.role === "tool");
  if (answers.length === 0)
    return { toolCalls: [{ name: "venue_desk", arguments: { message: "A venue in Lisbon for 12 people" } }] };
  return { content: `The venue desk says (${answers.length}): ${answers[0]?.content?.split("\n")[0]}` };
};

let peer: A2aAgentPeer;
let h: Harness;
let server: Server;
let publicUrl: string;
beforeAll(async () => {
  // Far off: each test finishes the remote task itself (peer.finish), or lets it run.
  peer = await startA2aAgent({ push: true, backgroundMs: 600_000 });
  // Arbor's server app (the HTTP API and A2A) on the current engine: a restart swaps the engine.
  server = await new Promise<Server>((resolve) => {
    const s = serve(
      {
        fetch: (request) => createServerApp({ engine: h.engine, keys, publicUrl }).fetch(request),
        port: 0,
        hostname: "127.0.0.1",
      },
      () => resolve(s as Server),
    );
  });
  publicUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await peer.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

beforeEach(async () => {
  peer.behaviour = "background";
  peer.dropPushes = false;
  peer.messages.length = 0;
  peer.requests.length = 0;
  peer.pushes.length = 0;
  h = await Harness.create({
    script,
    assistants: ORGANISER,
    outbound: LOOPBACK_ALLOWED,
    toolsConfig: {
      tools: { venue_desk: { kind: "a2a", url: peer.url, timeoutMs: TIMEOUT_MS } },
    },
    publicUrl: () => publicUrl,
  });
});
afterEach(async () => {
  await h.close();
});

/** Submits the request and waits until every step has returned: the leaf's turn has ended. */
async function handedOff() {
  const { rootTaskId } = await h.submit("Find a venue in Lisbon for 12 people");
  await h.idle();
  const send = peer.requests.find((r) => r.rpcMethod === "SendMessage");
  const remoteTaskId = [...peer.pushConfigs.keys()].at(-1) as string;
  const [leaf] = await h.rt.tasks.children(rootTaskId);
  const leafId = leaf?.taskId ?? rootTaskId;
  return { rootTaskId, leafId, send, remoteTaskId };
}

const remoteCalls = async () =>
  (await h.rt.state.byStatus<RemoteCall>("remote-call", "pending")).items.concat(
    (await h.rt.state.byStatus<RemoteCall>("remote-call", "settled")).items,
  );
const toolResults = async (taskId: string) =>
  (await h.rt.resources.children(taskId, "common.Message")).filter((m) => m.meta.name.includes("-tool-"));
const audit = async (taskId: string) => (await h.rt.audit.forTask(taskId)).map((r) => `${r.tool}:${r.stage}`);

describe("an A2A agent that pushes", () => {
  it("the turn ends while the remote works; its push resumes the leaf, which completes with the answer", async () => {
    const { rootTaskId, leafId, send, remoteTaskId } = await handedOff();
    // Sent with returnImmediately and a push config for a callback of Arbor's public URL.
    const configuration = (send?.params as { configuration?: Record<string, unknown> } | undefined)
      ?.configuration;
    expect(configuration).toMatchObject({
      returnImmediately: true,
      taskPushNotificationConfig: {
        url: expect.stringMatching(new RegExp(`^${publicUrl}/v1/a2a-callbacks/[A-Za-z0-9_-]{24}$`)),
        token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        authentication: { scheme: "Bearer", credentials: expect.any(String) },
      },
    });
    const token = peer.pushConfigs.get(remoteTaskId)?.token as string;

    // Every step returned (the bus is idle) and the call has no outcome: nothing runs, nothing waits.
    const view = await h.rt.tasks.view(rootTaskId);
    expect(view?.status).toBe("in_progress");
    expect(await toolResults(leafId)).toEqual([]);
    expect(await audit(leafId)).toEqual(["venue_desk:requested"]);
    const [call] = await h.engine.deps.state
      .byStatus<RemoteCall>("remote-call", "pending")
      .then((p) => p.items);
    expect(call?.data).toMatchObject({ taskId: leafId, slot: "turn-0001-tool-0", tool: "venue_desk" });
    expect(call?.data.pending?.remoteTaskId).toBe(remoteTaskId);
    expect(JSON.stringify(call)).not.toContain(token); // only its hash is kept
    expect(
      (await h.engine.deps.tools.history(leafId, call?.data.context.callId as string)).running,
    ).toBeFalsy();

    // The remote completes and pushes: settled, and the leaf takes its next turn.
    await peer.finish(remoteTaskId);
    expect(peer.pushes.at(-1)).toMatchObject({ status: 200, answer: { status: "settled" } });
    await h.idle();
    const { view: done, output } = await h.engine.result(rootTaskId);
    expect(done?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Found 2 venues (in the background).");
    const [result] = await toolResults(leafId);
    expect(result && "content" in result ? result.content : "").toContain(
      'Venues for "A venue in Lisbon for 12 people": Casa do Rio (40 seats), Sala Norte (16 seats).',
    );
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
    // One attempt's records: the same attempt and arguments' hash on both.
    const records = await h.rt.audit.forTask(leafId);
    expect(new Set(records.map((r) => `${r.attempt ?? 1}:${r.argumentsHash}`)).size).toBe(1);
    // Only SendMessage went out: no polling.
    expect(peer.requests.filter((r) => r.rpcMethod).map((r) => r.rpcMethod)).toEqual(["SendMessage"]);

    // A repeated push is a no-op: one result, one completion.
    expect(await peer.push(remoteTaskId)).toEqual({ status: 200, answer: { status: "already-settled" } });
    await h.idle();
    expect(await toolResults(leafId)).toHaveLength(1);
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
  });

  it("refuses a push without the call's token, or about another task, and takes a working one as news", async () => {
    const { rootTaskId, leafId, remoteTaskId } = await handedOff();
    const before = await remoteCalls();

    const wrong = await peer.push(remoteTaskId, { token: "not-the-token" });
    expect(wrong.status).toBe(401);
    expect(wrong.answer).toMatchObject({ error: { code: "UNAUTHENTICATED" } });
    expect((await peer.push(remoteTaskId, { token: null })).status).toBe(401);
    // A callback id nobody has out: the same 401.
    const config = peer.pushConfigs.get(remoteTaskId) as { url: string; token: string };
    const elsewhere = await fetch(config.url.replace(/[^/]+$/, "nosuchcallback"), {
      method: "POST",
      headers: { authorization: `Bearer ${config.token}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(elsewhere.status).toBe(401);

    // The right token, but a task of someone else: 400, nothing written.
    const other = await peer.push(remoteTaskId, {
      body: { task: { id: "another-task", contextId: "c", status: { state: "TASK_STATE_COMPLETED" } } },
    });
    expect(other.status).toBe(400);
    expect(other.answer).toMatchObject({ error: { code: "VALIDATION" } });
    expect((await peer.push(remoteTaskId, { body: [1, 2] })).status).toBe(400);
    // Over the body limit (1 MiB): 413, not read.
    const huge = await peer.push(remoteTaskId, { body: { padding: "x".repeat(1024 * 1024) } });
    expect(huge.status).toBe(413);

    // The task as it stands (working): accepted, nothing changes.
    expect(await peer.push(remoteTaskId)).toEqual({ status: 200, answer: { status: "accepted" } });
    await h.idle();
    expect(await remoteCalls()).toEqual(before);
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("in_progress");
    expect(await toolResults(leafId)).toEqual([]);
    expect(await audit(leafId)).toEqual(["venue_desk:requested"]);

    // A 0.3 push (a bare Task, the SDK's V03 serializer's shape) that says completed settles it;
    // then a working push (out of order) changes nothing.
    const legacy = await peer.push(remoteTaskId, {
      body: {
        kind: "task",
        id: remoteTaskId,
        contextId: "ctx",
        status: { state: "completed" },
        artifacts: [{ artifactId: "a1", parts: [{ kind: "text", text: "Casa do Rio has room." }] }],
      },
    });
    expect(legacy).toEqual({ status: 200, answer: { status: "settled" } });
    expect(
      await peer.push(remoteTaskId, {
        body: {
          statusUpdate: { taskId: remoteTaskId, contextId: "ctx", status: { state: "TASK_STATE_WORKING" } },
        },
      }),
    ).toEqual({ status: 200, answer: { status: "already-settled" } });
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Casa do Rio has room.");
  });

  it("a push that comes before the send has its answer is kept, and settles the call at once", async () => {
    peer.behaviour = "early";
    const { rootTaskId, leafId } = await handedOff();
    // Arbor had the callback on record before it gave it out: the push was taken, not refused.
    expect(peer.pushes).toMatchObject([{ status: 200, answer: { status: "accepted" } }]);
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Found 2 venues (before answering).");
    // The remote still says working: the answer came from the early push, not from asking.
    expect(peer.requests.filter((r) => r.rpcMethod === "GetTask")).toEqual([]);
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
  });

  it("an agent that pushes many times before the send has its answer: the last pushes are kept, the final one settles the call", async () => {
    peer.behaviour = "early-chatty";
    const { rootTaskId } = await handedOff();
    expect(peer.pushes).toHaveLength(26);
    expect(peer.pushes.every((p) => p.status === 200)).toBe(true);
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Found 2 venues (before answering).");
    expect(peer.requests.filter((r) => r.rpcMethod === "GetTask")).toEqual([]);
  });

  it("a push nested deeper than a Task's data may be is 400 and changes nothing", async () => {
    const { rootTaskId, leafId, remoteTaskId } = await handedOff();
    const before = await remoteCalls();
    const config = peer.pushConfigs.get(remoteTaskId) as { url: string; token: string };
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const res = await fetch(config.url, {
      method: "POST",
      headers: { authorization: `Bearer ${config.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        task: {
          id: remoteTaskId,
          contextId: "c",
          status: { state: "TASK_STATE_COMPLETED" },
          artifacts: [{ artifactId: "a", parts: [{ data: { data: "DEEP" } }] }],
        },
      }).replace('"DEEP"', deep),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { code: "VALIDATION", message: /nested at most 80 levels/ },
    });
    await h.idle();
    expect(await remoteCalls()).toEqual(before);
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("in_progress");
    expect(await toolResults(leafId)).toEqual([]);
  });

  it("a push that carries only the final status: the task is read back with GetTask", async () => {
    peer.dropPushes = true;
    const { rootTaskId, remoteTaskId } = await handedOff();
    await peer.finish(remoteTaskId);
    const update = {
      statusUpdate: { taskId: remoteTaskId, contextId: "ctx", status: { state: "TASK_STATE_COMPLETED" } },
    };
    expect(await peer.push(remoteTaskId, { body: update })).toEqual({
      status: 200,
      answer: { status: "settled" },
    });
    expect(peer.requests.filter((r) => r.rpcMethod === "GetTask")).toHaveLength(1);
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Found 2 venues (in the background).");
  });

  it("a lost push: at the deadline one GetTask settles the call", async () => {
    peer.dropPushes = true;
    const { rootTaskId, leafId, remoteTaskId } = await handedOff();
    await peer.finish(remoteTaskId);
    expect(peer.pushes).toEqual([]);
    // Before the deadline the watchdog leaves the leaf (nothing runs: it waits on the remote).
    expect(await waitsOnRemote(h.engine.deps, leafId)).toBe(true);
    await h.engine.watchdog(0);
    await h.idle();
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("in_progress");
    expect(peer.requests.filter((r) => r.rpcMethod === "GetTask")).toEqual([]);

    h.advance(TIMEOUT_MS + 1);
    expect(await waitsOnRemote(h.engine.deps, leafId)).toBe(false);
    await h.engine.watchdog(0);
    await h.idle();
    expect(peer.requests.filter((r) => r.rpcMethod === "GetTask")).toHaveLength(1);
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Found 2 venues (in the background).");
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
  });

  it("a remote still working at the deadline: the call fails with a timeout, as a waiting call would", async () => {
    const { rootTaskId, leafId } = await handedOff();
    h.advance(TIMEOUT_MS + 1);
    await h.engine.watchdog(0);
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe(`The venue desk says (1): venue_desk did not finish within ${TIMEOUT_MS} ms`);
    expect(
      (await h.rt.audit.forTask(leafId)).map((r) => `${r.tool}:${r.stage}${r.reason ? `:${r.reason}` : ""}`),
    ).toEqual(["venue_desk:requested", "venue_desk:failed:timeout"]);
  });

  it("a restart between the turn's end and the push: the push still resumes the leaf", async () => {
    const { rootTaskId, remoteTaskId } = await handedOff();
    await h.restart(); // runtime, engine and tools closed; new ones on the same data folder
    await peer.finish(remoteTaskId);
    expect(peer.pushes.at(-1)).toMatchObject({ status: 200, answer: { status: "settled" } });
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("The venue desk says (1): Found 2 venues (in the background).");
  });
});

describe("an agent that offers push, and a call that cannot be handed off", () => {
  const cases = [
    { why: "Arbor has no public URL", publicUrl: undefined, mayHandOff: true },
    { why: "the caller cannot take a pending result", publicUrl: "http://127.0.0.1:9", mayHandOff: false },
  ];
  it.each(cases)("$why: waits as before (blocking, no push config, polled until it settles)", async (c) => {
    const world = await openToolWorld("arbor-a2a-push-");
    const tools = await ToolService.open(
      { tools: { venue_desk: { kind: "a2a", url: peer.url } } },
      world.options({ defaultTimeoutMs: 10_000, ...(c.publicUrl ? { publicUrl: c.publicUrl } : {}) }),
    );
    try {
      const context: ToolContext = {
        taskId: `${tenantUrn("acme")}/plan.Task.t1`,
        actor: `${tenantUrn("acme")}/common.Assistant.a1`,
        callId: "call_1",
        // A caller that can settle the call later records the callback (here: nowhere).
        ...(c.mayHandOff ? { handOff: async () => {} } : {}),
      };
      peer.requests.length = 0;
      const running = tools.execute("venue_desk", { message: "Lisbon, 12 people" }, context);
      // The call polls the remote task until it settles: it is finished once the polls have begun.
      const taskId = await waitForTask();
      await peer.finish(taskId);
      const result = await running;
      expect(result.pending).toBeUndefined();
      expect(result.content).toMatch(/^Found 2 venues \(in the background\)\./);
      const send = peer.requests.find((r) => r.rpcMethod === "SendMessage");
      expect((send?.params as { configuration?: unknown } | undefined)?.configuration).toEqual({
        historyLength: 0,
      });
    } finally {
      await tools.close();
      await world.close();
    }
  });
});

/** The id of the remote task the last SendMessage made (GetTask polls name it). */
async function waitForTask(): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const poll = peer.requests.find((r) => r.rpcMethod === "GetTask");
    const id = (poll?.params as { id?: string } | undefined)?.id;
    if (id) return id;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("the tool never polled the remote task");
}
