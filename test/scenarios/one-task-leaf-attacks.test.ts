import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { EngineSettings, FaultPoint } from "../../shared/engine/context.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { type PostsEndpoint, startPostsEndpoint } from "../peers/posts-endpoint.ts";
import { CrashAt, Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * Attacks on a request of one task, whose leaf its plan step runs itself (engine.ts): its plan
 * command delivered again while the leaf runs, every command delivered twice, a crash at each
 * point, a turn that cannot be written. Its tool with effects must run once, and it must end done.
 */
let endpoint: PostsEndpoint;
let posts: string[];
beforeAll(async () => {
  endpoint = await startPostsEndpoint();
  posts = endpoint.posts;
});
afterAll(() => endpoint.close());
const httpTool = (path: string, risky: boolean) => endpoint.httpTool(path, risky);

const tools = () => ({ tools: { notify: httpTool("/notify", false) } });
const WORKER: AssistantDefinition[] = [
  { name: "Notifier", id: "notifier", purpose: "Notify the team", tools: ["notify"] },
];
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Notify", purpose: "Notify the team" });
  if (isEvaluation(r)) return pass();
  const told = r.messages.find((m) => m.role === "tool");
  return told
    ? { content: `noted: ${told.content}` }
    : { toolCalls: [{ name: "notify", arguments: { to: "team@example.com" } }] };
};

let h: Harness | undefined;
beforeEach(() => {
  posts.length = 0;
  endpoint.delayMs = 0;
});
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/**
 * The plan command delivered again (SQS at-least-once, Lambda's retry of a step that timed out)
 * while the first plan step has run the leaf's call and is about to keep its result. True once sent.
 */
function replanBeforeTheResult(harness: Harness): () => boolean {
  let plan: { id: string; detail: Record<string, unknown> } | undefined;
  harness.rt.bus.subscribe({
    name: "capture-plan",
    pattern: { "detail-type": ["PLAN_REQUESTED"] },
    handler: async (e) => {
      plan ??= { id: e.id, detail: { ...e.detail } };
    },
  });
  const resources = harness.engine.deps.resources;
  const put = resources.put.bind(resources);
  let redelivered = false;
  resources.put = async (given: unknown) => {
    const m = given as { meta?: { name?: string } };
    if (!redelivered && m.meta?.name === "turn-0001-tool-0" && plan) {
      redelivered = true;
      const { messageUrn, mode } = plan.detail as { messageUrn: string; mode: string };
      await harness.rt.bus.publish([
        { id: plan.id, source: "arbor.engine", detailType: "PLAN_REQUESTED", detail: { messageUrn, mode } },
      ]);
      await new Promise((r) => setTimeout(r, 300));
    }
    return put(given);
  };
  return () => redelivered;
}

describe("a request of one task whose plan command comes again while its leaf runs", () => {
  // Its call's claim on record (a store others may work on, as on AWS), and in memory (the sole
  // worker of a locked data folder, as `arbor serve`).
  for (const lockAs of [undefined, "arbor serve"])
    it(`does not run the leaf's tool with effects a second time (${lockAs ? "the folder's sole worker" : "a shared store"})`, async () => {
      h = await Harness.create({
        script,
        assistants: WORKER,
        toolsConfig: tools(),
        outbound: LOOPBACK_ALLOWED,
        ...(lockAs ? { lockAs } : {}),
      });
      const harness = h;
      const redelivered = replanBeforeTheResult(harness);
      const { rootTaskId } = await harness.submit("Notify the team");
      await harness.runToEnd(rootTaskId);
      expect(redelivered()).toBe(true);
      expect((await harness.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(posts).toEqual(["/notify"]);
    });
});

describe("a request of one task with a risky call, its plan command coming again after the approved call ran", () => {
  it("neither runs the call again nor asks for a new approval, and ends done", async () => {
    h = await Harness.create({
      script,
      assistants: WORKER,
      toolsConfig: { tools: { notify: httpTool("/notify", true) } },
      outbound: LOOPBACK_ALLOWED,
    });
    const harness = h;
    const redelivered = replanBeforeTheResult(harness);
    const { rootTaskId } = await harness.submit("Notify the team");
    await harness.idle();
    const asked = await harness.pending(rootTaskId);
    expect(asked).toHaveLength(1);
    await harness.engine.respond(
      asked[0]?.meta.id as string,
      { selectedOptionId: "approve" },
      { id: "user_ada", kind: "human" },
    );
    await harness.idle();
    expect(redelivered()).toBe(true);
    const again = await harness.pending(rootTaskId);
    const status = (await harness.rt.tasks.view(rootTaskId))?.status;
    expect({ again: again.map((p) => p.meta.name), status }).toEqual({ again: [], status: "done" });
    await harness.runToEnd(rootTaskId, { answer: { selectedOptionId: "deny" } });
    expect((await harness.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(posts).toEqual(["/notify"]);
  });
});

describe("a request of one task, every command delivered twice", () => {
  it("runs its tool with effects once and ends done", async () => {
    endpoint.delayMs = 50;
    h = await Harness.create({
      script,
      assistants: WORKER,
      toolsConfig: tools(),
      outbound: LOOPBACK_ALLOWED,
      bus: { deliveries: 2 },
    });
    const { rootTaskId } = await h.submit("Notify the team");
    await h.runToEnd(rootTaskId);
    expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(posts).toEqual(["/notify"]);
  });
});

const CRASHES: [FaultPoint, string, Partial<EngineSettings>?][] = [
  ["after-llm", "plan"],
  ["after-write", "plan"],
  ["after-write", "materialise"],
  ["after-record", "TaskCreated"],
  ["after-record", "TaskStarted"],
  ["after-llm", "turn"],
  ["after-write", "turn"],
  ["before-publish", "TURN_REQUESTED", { turnStepMs: 0 }],
  ["after-write", "complete"],
  ["after-record", "TaskCompleted"],
  ["before-publish", "RESOURCE_PUT"],
];

/**
 * A process that dies at `point` of `step` (what it was doing is lost), a person approving what it
 * asked before it died, then a new process driving the request to its end: done, the tool run once.
 */
async function crashedThenDone(
  toolsConfig: Record<string, unknown>,
  [point, step, settings]: [FaultPoint, string, Partial<EngineSettings>?],
): Promise<void> {
  h = await Harness.create({
    script,
    assistants: WORKER,
    toolsConfig,
    outbound: LOOPBACK_ALLOWED,
    bus: { maxAttempts: 1 },
    ...(settings ? { settings } : {}),
  });
  await h.restart();
  const crash = new CrashAt(point, step);
  await h.open(crash);
  const { rootTaskId } = await h.submit("Notify the team");
  await h.idle();
  if (!crash.fired) {
    // It waits for the approval (a risky tool): approved on the process that then dies.
    const [p] = await h.pending(rootTaskId);
    if (p)
      await h.engine.respond(p.meta.id, { selectedOptionId: "approve" }, { id: "user_ada", kind: "human" });
    await h.idle();
  }
  expect(crash.fired).toBe(true);
  await h.restart();
  await h.runToEnd(rootTaskId);
  expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
  expect(posts).toEqual(["/notify"]);
}

describe("a request of one task with a tool with effects, crashed", () => {
  for (const crash of CRASHES)
    it(`crash ${crash[0]} ${crash[1]}: done, the tool run once`, () => crashedThenDone(tools(), crash));
});

describe("a request of one task whose turn cannot be written once", () => {
  for (const delay of [0, 30])
    it(`runs no tool before the turn is on record, and ends done with the tool run once (put delay ${delay})`, async () => {
      h = await Harness.create({
        script,
        assistants: WORKER,
        toolsConfig: tools(),
        outbound: LOOPBACK_ALLOWED,
      });
      const resources = h.engine.deps.resources;
      const put = resources.put.bind(resources);
      let failed = 0;
      let postsAtFailure = -1;
      resources.put = async (given: unknown) => {
        const m = given as { meta?: { name?: string }; toolCalls?: unknown[] };
        if (failed === 0 && m.meta?.name === "turn-0001" && m.toolCalls) {
          failed++;
          await new Promise((r) => setTimeout(r, delay));
          postsAtFailure = posts.length;
          throw new Error("the object store is down");
        }
        return put(given);
      };
      const { rootTaskId } = await h.submit("Notify the team");
      await h.runToEnd(rootTaskId);
      expect(failed).toBe(1);
      expect(postsAtFailure).toBe(0);
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(posts).toEqual(["/notify"]);
    });
});

const riskyTools = () => ({ tools: { notify: httpTool("/notify", true) } });
describe("a request of one task with a risky tool, crashed", () => {
  for (const crash of [...CRASHES, ["after-record", "UserInteractionRequested"] as [FaultPoint, string]])
    it(`crash ${crash[0]} ${crash[1]}: done, the tool run once`, () => crashedThenDone(riskyTools(), crash));
});
