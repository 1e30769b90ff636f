import { type Task, TaskState } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { ServerCallContext } from "@a2a-js/sdk/server";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MAX_ITEM_BYTES } from "../../shared/adapters/shared/state-store-helpers.ts";
import {
  A2A_TASK_RECORD_BUDGET,
  ArborCaller,
  ArborContexts,
  ArborTaskStore,
  a2aContextKey,
  a2aTaskKey,
  a2aTasksParent,
} from "../../shared/channels/a2a/a2a-store.ts";
import { authenticatedAs } from "../../shared/ports/key-store.ts";
import {
  ANSWER,
  a2aClient,
  a2aScript,
  ada,
  conversationOf,
  intruder,
  list,
  partner,
  partsText,
  rootOf,
  send,
  serveA2a,
  TEAM,
  userMessage,
} from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";

/**
 * The A2A view outlives `arbor serve`: tasks (status, history, artifacts, the link to Arbor's
 * request) and the contextIds callers chose are records in Arbor's state store. Before the restart
 * the SDK's client sends five requests (one completes, two stop at input-required, one names its
 * own contextId, one is still working when its send stops waiting); then the server, the engine
 * and the runtime are closed and new ones open the same data folder, and a new client (the server
 * has a new port) reads and continues them.
 */
const script = a2aScript(200);
/** A new server on the harness's current engine, on an ephemeral port. */
const start = (options: { waitMs?: number } = {}) => serveA2a(h.engine, options);
const client = (key: string, url: string) => a2aClient(key, url);
const getTask = (c: Client, id: string) => c.getTask({ tenant: "", id, historyLength: undefined });
const contentsOf = async (conversationUrn: string) =>
  (await h.rt.resources.children(conversationUrn, "common.Message")).map(
    (m) => (m as { content?: string }).content,
  );

let h: Harness;
let served: Awaited<ReturnType<typeof start>>;
/** Before the restart: what the client was answered, and GetTask's answer right before it. */
let completed: Task;
let completedSeen: Task;
let waiting: Task;
let asked: Task;
let threaded: Task;
let slow: Task;

beforeAll(async () => {
  h = await Harness.create({ script, assistants: TEAM, settings: { electionThreshold: -1 } });
  served = await start();
  const agent = await client(partner.key, served.url);
  completed = await send(agent, userMessage("What is the cost per person of the offsite?"));
  waiting = await send(await client(ada.key, served.url), userMessage("Email the team about the offsite"));
  asked = await send(agent, userMessage("Email the team about the offsite, please"));
  threaded = await send(agent, userMessage("What is the cost per person?", { contextId: "thread-9" }));
  // A send that stops waiting while Arbor still works: its A2A task stays "working" on disk.
  const impatient = await start({ waitMs: 20 });
  try {
    slow = await send(await client(partner.key, impatient.url), userMessage("Compute it slowly"));
  } finally {
    await impatient.close();
  }
  await h.idle();
  completedSeen = await getTask(agent, completed.id);

  // The restart: server, engine and runtime closed; new ones on the same data folder.
  await served.close();
  await h.restart();
  served = await start();
});
afterAll(async () => {
  await served?.close();
  await h?.close();
});
afterEach(async () => {
  await h.idle();
});

describe("before the restart", () => {
  it("the five tasks stood as the protocol says", () => {
    expect(completed.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(threaded.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(threaded.contextId).toBe("thread-9");
    expect(slow.status?.state).toBe(TaskState.TASK_STATE_WORKING);
    expect(completedSeen).toEqual(completed);
  });
});

describe("after the restart", () => {
  it("GetTask returns the completed task as it was: same status, artifact, history and link", async () => {
    const c = await client(partner.key, served.url);
    const seen = await getTask(c, completed.id);
    expect(seen).toEqual(completedSeen);
    expect(seen.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    expect(rootOf(seen)).toBe(rootOf(completed));
    expect(conversationOf(seen)).toBe(completed.contextId);
    expect(partsText(seen.history[0]?.parts)).toBe("What is the cost per person of the offsite?");
    // It is a record of the tenant's in the state store.
    const record = await h.rt.state.get(a2aTaskKey("acme", completed.id));
    expect(record).toMatchObject({ kind: "a2a-task", parent: a2aTasksParent("acme") });
  });

  it("ListTasks lists the tasks from before the restart, with the SDK's filters and pages", async () => {
    const c = await client(partner.key, served.url);
    // The partner's own: the task ada started is hers, not the partner's to see.
    const before = [completed, asked, threaded, slow].map((t) => t.id);
    const all = await list(c);
    expect(all.tasks.map((t) => t.id)).toEqual(expect.arrayContaining(before));
    expect(all.tasks.map((t) => t.id)).not.toContain(waiting.id);
    expect((await list(await client(ada.key, served.url))).tasks.map((t) => t.id)).toEqual([waiting.id]);
    // Without includeArtifacts, no artifacts; historyLength 0, no history.
    expect(all.tasks.every((t) => t.artifacts.length === 0)).toBe(true);
    const withArtifacts = await list(c, { includeArtifacts: true, historyLength: 0 });
    const done = withArtifacts.tasks.find((t) => t.id === completed.id);
    expect(done?.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    expect(withArtifacts.tasks.every((t) => t.history.length === 0)).toBe(true);
    // By contextId and by status.
    expect((await list(c, { contextId: "thread-9" })).tasks.map((t) => t.id)).toContain(threaded.id);
    expect((await list(c, { contextId: "thread-9" })).tasks.every((t) => t.contextId === "thread-9")).toBe(
      true,
    );
    const asking = await list(c, { status: TaskState.TASK_STATE_INPUT_REQUIRED });
    expect(asking.tasks.every((t) => t.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED)).toBe(true);
    // Paged two at a time: every task once, in the same order as one page.
    const paged: string[] = [];
    let pageToken = "";
    do {
      const page = await list(c, { pageSize: 2, pageToken });
      expect(page.tasks.length).toBeLessThanOrEqual(2);
      paged.push(...page.tasks.map((t) => t.id));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(paged).toEqual((await list(c)).tasks.map((t) => t.id));
  });

  it("a follow-up to the task that waited for input reaches the engine, and the task completes", async () => {
    const person = await client(ada.key, served.url);
    expect((await getTask(person, waiting.id)).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("awaiting_user");
    const done = await send(
      person,
      userMessage("Allow", { taskId: waiting.id, contextId: waiting.contextId }),
    );
    expect(done.id).toBe(waiting.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partsText(done.artifacts[0]?.parts)).toMatch(/^Emailed the team: /);
    expect(rootOf(done)).toBe(rootOf(waiting));
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("done");
    // The history kept the request from before the restart and the answer after it.
    expect(done.history.map((m) => partsText(m.parts))).toEqual(
      expect.arrayContaining(["Email the team about the offsite", "Allow"]),
    );
  });

  it("CancelTask on a task that waited for input cancels Arbor's request, and says who canceled it", async () => {
    const c = await client(partner.key, served.url);
    const canceled = await c.cancelTask({ tenant: "", id: asked.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(partsText(canceled.status?.message?.parts)).toBe(
      "Task canceled: canceled over A2A by agent_partner",
    );
    expect((await h.engine.result(rootOf(asked))).view?.status).toBe("canceled");
    expect((await getTask(c, asked.id)).status?.state).toBe(TaskState.TASK_STATE_CANCELED);
  });

  it("a task whose send stopped waiting before the restart: GetTask brings it up to Arbor's state", async () => {
    const c = await client(partner.key, served.url);
    const seen = await getTask(c, slow.id);
    expect(seen.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(seen.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    expect((await h.engine.result(rootOf(slow))).view?.status).toBe("done");
  });

  it("a contextId the caller chose continues the same conversation", async () => {
    const c = await client(partner.key, served.url);
    const next = await send(c, userMessage("And per day?", { contextId: "thread-9" }));
    expect(next.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(next.contextId).toBe("thread-9");
    expect(conversationOf(next)).toBe(conversationOf(threaded));
    expect(await contentsOf(conversationOf(threaded))).toEqual([
      "What is the cost per person?",
      "And per day?",
    ]);
    expect(await h.rt.state.get(a2aContextKey("acme", "thread-9"))).toMatchObject({
      kind: "a2a-context",
      data: { contextId: "thread-9", conversationUrn: conversationOf(threaded) },
    });
  });

  it("another tenant's key still finds none of them, and its own thread-9 is its own conversation", async () => {
    const stranger = await client(intruder.key, served.url);
    for (const task of [completed, waiting, asked, threaded, slow]) {
      const notFound = `Task not found: ${task.id}`;
      await expect(getTask(stranger, task.id)).rejects.toThrow(notFound);
      await expect(send(stranger, userMessage("approve", { taskId: task.id }))).rejects.toThrow(notFound);
      await expect(stranger.cancelTask({ tenant: "", id: task.id, metadata: undefined })).rejects.toThrow(
        notFound,
      );
    }
    expect((await list(stranger)).tasks).toEqual([]);
    const own = await send(stranger, userMessage("What is the cost per person?", { contextId: "thread-9" }));
    expect(own.contextId).toBe("thread-9");
    expect(conversationOf(own)).toMatch(/^cld:common\.Tenant\.beta\/common\.Conversation\./);
    expect(conversationOf(own)).not.toBe(conversationOf(threaded));
    expect((await list(stranger)).tasks.map((t) => t.id)).toEqual([own.id]);
  });
});

describe("the records", () => {
  const partnerCall = () =>
    new ServerCallContext({
      user: new ArborCaller(authenticatedAs(partner.entry)),
    });

  it("a history past the record budget keeps its newest messages, and the task stays readable", async () => {
    expect(A2A_TASK_RECORD_BUDGET).toBeLessThan(MAX_ITEM_BYTES);
    const c = await client(partner.key, served.url);
    const task = await send(c, userMessage("What is the cost per person?"));
    const store = new ArborTaskStore(h.engine);
    const context = partnerCall();
    const big = (i: number) => ({ ...userMessage(`${i} ${"x".repeat(20_000)}`), taskId: task.id });
    const history = Array.from({ length: 40 }, (_, i) => big(i)); // ~800 KB
    await store.save({ ...task, history }, context);

    const record = await h.rt.state.get(a2aTaskKey("acme", task.id));
    expect(Buffer.byteLength(JSON.stringify(record?.data))).toBeLessThanOrEqual(A2A_TASK_RECORD_BUDGET);
    const loaded = await store.load(task.id, context);
    const kept = loaded?.history ?? [];
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(40);
    // The newest ones, in order.
    expect(kept.map((m) => m.messageId)).toEqual(history.slice(-kept.length).map((m) => m.messageId));
    expect(loaded?.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    expect(rootOf(loaded as Task)).toBe(rootOf(task));
    expect((await getTask(c, task.id)).history).toHaveLength(kept.length);
  });

  it("a contextId too long for a key is kept by its hash, per tenant, and read back by a new process", async () => {
    const long = `thread-${"y".repeat(500)}`;
    const urn = "cld:common.Tenant.acme/common.Conversation.long";
    expect(a2aContextKey("acme", long)).toMatch(/^a2a-context#acme#sha256:[0-9a-f]{64}$/);
    expect(await new ArborContexts(h.engine).name("acme", long, urn)).toBe(urn);
    const fresh = new ArborContexts(h.engine); // nothing in memory, as after a restart
    expect(await fresh.conversationOf("acme", long)).toBe(urn);
    expect(await fresh.conversationOf("beta", long)).toBeUndefined();
    // Named already: a second name for it loses to the first.
    expect(await fresh.name("acme", long, `${urn}2`)).toBe(urn);
  });

  it("saves of one task racing each other all land (a conflict is read again and retried)", async () => {
    const c = await client(partner.key, served.url);
    const task = await send(c, userMessage("What is the cost per person?"));
    const version = (await h.rt.state.get(a2aTaskKey("acme", task.id)))?.version as number;
    const context = partnerCall();
    const stores = [new ArborTaskStore(h.engine), new ArborTaskStore(h.engine)];
    const saves = Array.from({ length: 4 }, (_, i) =>
      (stores[i % 2] as ArborTaskStore).save({ ...task, metadata: { ...task.metadata, n: i } }, context),
    );
    await Promise.all(saves);
    expect((await h.rt.state.get(a2aTaskKey("acme", task.id)))?.version).toBe(version + 4);
  });
});
