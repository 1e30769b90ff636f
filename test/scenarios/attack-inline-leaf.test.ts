import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { Harness } from "./engine-harness.ts";
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

describe("a request of one task whose plan command comes again while its leaf runs", () => {
  it("does not run the leaf's tool with effects a second time", async () => {
    h = await Harness.create({
      script,
      assistants: WORKER,
      toolsConfig: tools(),
      outbound: LOOPBACK_ALLOWED,
    });
    const harness = h;
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
        // The plan command delivered again (SQS at-least-once, a Lambda retry) while the first
        // plan step has run the call and is about to keep its result.
        const { messageUrn, mode } = plan.detail as { messageUrn: string; mode: string };
        await harness.rt.bus.publish([
          { id: plan.id, source: "arbor.engine", detailType: "PLAN_REQUESTED", detail: { messageUrn, mode } },
        ]);
        await new Promise((r) => setTimeout(r, 300));
      }
      return put(given);
    };
    const { rootTaskId } = await harness.submit("Notify the team");
    await harness.runToEnd(rootTaskId);
    expect(redelivered).toBe(true);
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
    const { rootTaskId } = await harness.submit("Notify the team");
    await harness.idle();
    const asked = await harness.pending(rootTaskId);
    expect(asked).toHaveLength(1);
    await harness.engine.respond(
      asked[0]!.meta.id,
      { selectedOptionId: "approve" },
      { id: "user_ada", kind: "human" },
    );
    await harness.idle();
    expect(redelivered).toBe(true);
    const again = await harness.pending(rootTaskId);
    const status = (await harness.rt.tasks.view(rootTaskId))?.status;
    expect({ again: again.map((p) => p.meta.name), status }).toEqual({ again: [], status: "done" });
    await harness.runToEnd(rootTaskId, { answer: { selectedOptionId: "deny" } });
    expect((await harness.rt.tasks.view(rootTaskId))?.status).toBe("done");
    expect(posts).toEqual(["/notify"]);
  });
});
