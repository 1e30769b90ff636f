import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { EngineSettings, FaultPoint } from "../../shared/engine/context.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { CrashAt, Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

let server: Server;
let base: string;
const posts: string[] = [];
let delayMs = 0;
beforeAll(async () => {
  server = createServer(async (req, res) => {
    for await (const _ of req);
    posts.push(req.url ?? "");
    await new Promise((r) => setTimeout(r, delayMs));
    res.writeHead(200, { "content-type": "text/plain" }).end("ok, done");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const httpTool = (path: string, risky: boolean) => ({
  kind: "http",
  url: `${base}${path}`,
  risky,
  timeoutMs: 120_000,
  description: `POST ${path}`,
  parameters: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
});
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
  delayMs = 0;
});
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("a request of one task, every command delivered twice", () => {
  it("runs its tool with effects once and ends done", async () => {
    delayMs = 50;
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

describe("a request of one task with a tool with effects, crashed", () => {
  for (const [point, step, settings] of CRASHES)
    it(`crash ${point} ${step}: done, the tool run once`, async () => {
      h = await Harness.create({
        script,
        assistants: WORKER,
        toolsConfig: tools(),
        outbound: LOOPBACK_ALLOWED,
        bus: { maxAttempts: 1 },
        ...(settings ? { settings } : {}),
      });
      await h.restart();
      const crash = new CrashAt(point, step);
      await h.open(crash);
      const { rootTaskId } = await h.submit("Notify the team");
      await h.idle();
      expect(crash.fired).toBe(true);
      await h.restart();
      await h.runToEnd(rootTaskId);
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(posts).toEqual(["/notify"]);
    });
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
  for (const [point, step, settings] of [
    ...CRASHES,
    ["after-record", "UserInteractionRequested"] as [FaultPoint, string],
  ])
    it(`crash ${point} ${step}: done, the tool run once`, async () => {
      h = await Harness.create({
        script,
        assistants: WORKER,
        toolsConfig: riskyTools(),
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
        // waiting for the approval: approve on the crashing process
        const [p] = await h.pending(rootTaskId);
        if (p)
          await h.engine.respond(
            p.meta.id,
            { selectedOptionId: "approve" },
            { id: "user_ada", kind: "human" },
          );
        await h.idle();
      }
      await h.restart();
      await h.runToEnd(rootTaskId);
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
      expect(posts).toEqual(["/notify"]);
    });
});
