import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createWatchdogHandler } from "../../functions/watchdog.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { leafSlotsKey } from "../../shared/engine/leaf-slots.ts";
import { toolUrn } from "../../shared/tools/service/tool-registry.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type AwsFunctions, startAwsFunctions } from "./aws-functions.ts";
import { type AwsWorld, EventBridgePlayer, guarded, startAwsWorld, watchdogGuard } from "./aws-world.ts";

/**
 * Each function as the stack deploys it: its own instance, started cold under its own grants
 * (infra/constructs/grants.ts), never warmed by another. The other offline tests share one step
 * handler across routes, so whichever route runs first pays the start (the vector index opened,
 * the clients made) under its own grants; here each route's start is checked under the route's.
 * A request of a plan, two parents and four leaves that each call a tool runs to its end; every
 * function it reaches (the API, each step, the tool function, the watchdog) was refused nothing,
 * and each started under its own guard (the vector index checked at its start).
 */
const TENANT = "acme";
const BUS = "arbor-grants";
const TOOL_FUNCTION = "arbor-grants-tools";
const root = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });
const WORKER = { purpose: "Calculate costs and count words of the project's texts", tools: ["calculator"] };
const TEAM = { assistants: [{ name: "Worker", id: "worker", ...WORKER }] };
const task = (name: string, subtasks?: unknown[]) => ({
  name,
  purpose: WORKER.purpose,
  ...(subtasks ? { evaluation: "Every part reported its result", subtasks } : {}),
});
const PLAN = task("Prepare the project report", [
  task("Workstream 1", [task("Item 1 of workstream 1"), task("Item 2 of workstream 1")]),
  task("Workstream 2", [task("Item 1 of workstream 2"), task("Item 2 of workstream 2")]),
]);

describe("each function started cold, on its own grants", () => {
  let world: AwsWorld;
  let fns: AwsFunctions;
  const cold = new Map<string, StepHandler>();
  const player = new EventBridgePlayer(() => world, BUS, {
    byRoute: (route) => {
      let handler = cold.get(route);
      if (!handler) {
        handler = createStepHandler(fns.stepDeps);
        cold.set(route, handler);
      }
      return handler;
    },
  });

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-grants",
      bus: BUS,
      model: planningModel({
        plan: PLAN,
        evaluation: { reason: "every part reported", answer: "done" },
        leaf: ({ toolResult }) =>
          toolResult === undefined
            ? { toolCalls: [{ name: "calculator", arguments: { a: 1200, b: 12, op: "divide" } }] }
            : { content: `100 each (${toolResult})` },
      }),
      env: {
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
        // Three of the four leaves at once: one waits for a slot, and a leaf's end starts it.
        ARBOR_LEAVES_AT_ONCE: "3",
      },
    });
    fns = await startAwsFunctions(world, TOOL_FUNCTION, [root.entry], {
      engineSettings: { electionThreshold: -1, turnStepMs: 0 },
    });
  });

  afterAll(async () => {
    for (const handler of cold.values()) await handler.close();
    await fns?.close();
    await world?.close();
  });

  it("runs a request through every function it reaches, none refused, each started under its own grants", async () => {
    const admin = fns.as(root.key);
    expect((await admin.put("/v1/admin/team", TEAM)).status).toBe(200);
    const sent = await admin.post("/v1/messages", { text: "Prepare the project report" });
    expect(sent.status).toBe(202);
    await player.drain();
    const rootTask = String((sent.json as { rootTaskId?: string }).rootTaskId);
    expect((await fns.rt.tasks.view(rootTask))?.status).toBe("done");
    // The request's leaf slots were taken and all given back (engine/leaf-slots.ts).
    expect((await fns.rt.state.get(leafSlotsKey(rootTask)))?.data).toEqual({ running: [], parked: [] });

    // The routes the request reached, each on its own cold instance.
    const ran = [...cold.keys()].sort();
    expect(ran).toEqual(expect.arrayContaining(["index-output", "plan", "ready", "supervise", "turn"]));
    for (const route of ran) {
      const guard = player.guardOf(route);
      expect([route, guard?.denied]).toEqual([route, []]);
      // Its start (the vector index opened and checked) ran under its own grants.
      expect([route, guard?.used.has("VectorIndexOpen")]).toEqual([route, true]);
    }
    // The API and the tool function: fresh instances of their own, held to their grants (aws-functions.ts).
    expect(fns.toolGuard.denied).toEqual([]);
    expect(fns.toolGuard.used.has("VectorIndex")).toBe(true);

    // The watchdog, cold: it finds nothing to send again, indexes, and was refused nothing.
    const guard = watchdogGuard(world);
    const watchdog = guarded(guard, createWatchdogHandler(fns.stepDeps));
    try {
      expect(await watchdog()).toEqual({ redriven: 0 });
      expect(guard.denied).toEqual([]);
      expect(guard.used.has("VectorIndexOpen")).toBe(true);
      // It indexed the request's tasks and the tenant's tools (a first registration), on its own rights.
      expect(guard.used.has("TaskIndex")).toBe(true);
      expect(guard.used.has("ToolRegistrations")).toBe(true);
    } finally {
      await watchdog.close();
    }

    // What the watchdog indexed is found over the API, under the API's own grants: the tenant's
    // tools (its tasks wait for the log's settling time, DynamoDB's LOG_SETTLE_MS, before a pass takes them).
    const found = await admin.get(
      `/v1/search?q=${encodeURIComponent("divide two numbers")}&kinds=common.Tool`,
    );
    expect(found.status).toBe(200);
    const results = (found.json as { results: { urn: string; text: string }[] }).results;
    expect(results.map((r) => r.urn)).toContain(toolUrn(TENANT, "calculator"));
  });
});
