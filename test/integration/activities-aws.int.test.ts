import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import type { ScriptedTurn } from "../../shared/adapters/llm/scripted-llm.ts";
import type { TaskState } from "../../shared/domain/resources.ts";
import { COMMANDS } from "../../shared/engine/context.ts";
import type { Engine, Submitted } from "../../shared/engine/engine.ts";
import { activityKey } from "../../shared/engine/turn/activity-step.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { type AwsEngineClients, createAwsEngine } from "../../shared/runtime/aws/aws-engine.ts";
import type { ToolFunctionRequest } from "../../shared/tools/bindings/tool-function-protocol.ts";
import type { ConverseWireRequest } from "../peers/fake-bedrock.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { type AwsWorld, EventBridgePlayer, startAwsWorld } from "./aws-world.ts";

/**
 * Activities on the deployed shape: the step handlers (functions/engine-step.ts) driven as
 * EventBridge drives them, the tool function (functions/tool.ts) running the activities' handlers,
 * DynamoDB Local, s3rver and the fake Bedrock through the real SDK clients. A single-task plan
 * whose leaf calls a branching activity (awaited, stored) and a fire-and-forget one (the
 * ACTIVITY_REQUESTED command, routed to the "activity" step function).
 */
const TENANT = "acme";
const BUS = "arbor-activities-test";
const WEATHER = { purpose: "Check the forecast and note it" };

const model = (request: ConverseWireRequest): ScriptedTurn => {
  const forced = request.toolConfig?.toolChoice?.tool?.name;
  if (forced === "create_plan")
    return { toolCalls: [{ name: "create_plan", arguments: { name: "Forecast", ...WEATHER } }] };
  const turns = (request.messages ?? []).filter((m) => m.role === "assistant").length;
  if (turns === 0)
    return {
      toolCalls: [
        {
          name: "compare_threshold",
          arguments: { value: 31, threshold: 25, _outputPath: "state.hot || state.cold" },
        },
        { name: "notify_log", arguments: { message: "forecast checked", _instance: "n1" } },
      ],
    };
  const system = (request.system ?? []).map((s) => s.text ?? "").join("\n");
  return { content: system.includes("- state.hot = ") ? "It will be hot" : "no state seen" };
};

describe("activities through the step and tool functions", () => {
  let world: AwsWorld;
  let dir: string;
  let rt: AwsRuntime;
  let engine: Engine;
  let handlers: StepHandler[];
  let toolHandler: ToolHandler;
  let toolPeer: LambdaInvokePeer;
  let submitted: Submitted;
  const { drain, deliver, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => handlers,
  );

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-activities-aws-"));
    const toolsFile = join(dir, "tools.json");
    await writeFile(
      toolsFile,
      JSON.stringify({
        tools: {
          compare_threshold: { kind: "builtin", function: "compare_threshold" },
          notify_log: { kind: "builtin", function: "notify_log" },
        },
      }),
    );
    toolPeer = await LambdaInvokePeer.start({ "arbor-tools": (event) => toolHandler(event) });
    world = await startAwsWorld({
      name: "arbor-activities",
      bus: BUS,
      model,
      env: { ARBOR_STAGE: "test", ARBOR_TOOLS_FILE: toolsFile },
    });
    const engineClients = {
      ...world.engineClients,
      bedrock: world.engineClients.bedrock as NonNullable<AwsEngineClients["bedrock"]>,
      lambda: toolPeer.client(),
    };
    toolHandler = createToolHandler({
      config: () => world.config,
      clients: world.clients,
      tools: {
        clients: {
          embeddings: engineClients.embeddings,
          s3vectors: engineClients.s3vectors,
          s3: engineClients.s3,
        },
      },
    });
    rt = createAwsRuntime(world.config, world.clients);
    engine = await createAwsEngine(rt, world.config, { clients: engineClients });
    const deps = {
      config: () => ({ ...world.config, toolFunction: "arbor-tools" }),
      clients: world.clients,
      engine: { clients: engineClients },
    };
    handlers = [createStepHandler(deps), createStepHandler(deps)];
  });

  afterAll(async () => {
    for (const h of handlers ?? []) await h.close();
    await toolHandler?.close();
    await toolPeer?.close();
    await rt?.close();
    await world?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const executed = () =>
    toolPeer.invocations
      .map((i) => i.payload as ToolFunctionRequest)
      .filter((p): p is Extract<ToolFunctionRequest, { op: "ExecuteTool" }> => p.op === "ExecuteTool");

  it("stores the branch the activity chose, and runs the fire-and-forget one in its own step", async () => {
    await engine.registerAssistants(TENANT, [
      { name: "Weather", id: "weather", ...WEATHER, tools: ["compare_threshold", "notify_log"] },
    ]);
    submitted = await engine.submit({
      tenant: TENANT,
      text: "Check the forecast and note it",
      actor: { id: "user_alice", kind: "human" },
    });
    await drain();
    const taskId = submitted.rootTaskId;
    const { view, output } = await engine.result(taskId);
    expect(view?.status).toBe("done");
    expect(output).toBe("It will be hot"); // the second turn saw the state in its system prompt

    const state = (await rt.resources.children(taskId, "plan.State")) as TaskState[];
    expect(state.map((e) => [e.path, e.value])).toEqual([
      ["state.hot", { value: 31, threshold: 25, above: true }],
    ]);

    // Both calls went to the tool function with the call's meta-properties and the scoped messages.
    const calls = executed();
    expect(calls.map((c) => c.tool).sort()).toEqual(["compare_threshold", "notify_log"]);
    const compare = calls.find((c) => c.tool === "compare_threshold");
    expect(compare?.arguments).toEqual({ value: 31, threshold: 25 });
    expect(compare?.context.activity?.call).toMatchObject({
      name: "compare_threshold",
      _outputPath: "state.hot || state.cold",
      outputPaths: ["state.hot", "state.cold"],
    });
    expect(compare?.context.activity?.context.map((m) => m.role)).toEqual(["user", "assistant"]);
    const note = calls.find((c) => c.tool === "notify_log");
    expect(note?.arguments).toEqual({ message: "forecast checked" });
    expect(note?.context.activity?.call._instance).toBe("n1");

    // The fire-and-forget call: its command went to the activity step's queue, and it ran once.
    const commands = events().filter((e) => e["detail-type"] === COMMANDS.activity);
    expect(commands).toHaveLength(1);
    const record = await rt.state.get(activityKey(taskId, "turn-0001-tool-1"));
    expect(record?.status).toBe("done");
    const audit = (await rt.audit.forTask(taskId)).filter((r) => r.tool === "notify_log");
    expect(audit.map((r) => r.stage)).toEqual(["requested", "completed"]);

    // Delivered again (EventBridge delivers at least once): nothing runs again.
    await deliver(commands);
    await drain();
    expect(executed().filter((c) => c.tool === "notify_log")).toHaveLength(1);
  });

  it("refuses a step input for a route that does not exist, naming what it expects", async () => {
    await expect(
      handlers[0]?.({
        subscription: "activities",
        event: { id: "x", source: "arbor.engine", "detail-type": COMMANDS.activity, detail: {} },
      }),
    ).rejects.toThrow(/Invalid engine step input/);
  });
});
