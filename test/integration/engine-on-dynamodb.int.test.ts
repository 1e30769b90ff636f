import { type AttributeValue, type DynamoDBClient, ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createWatchdogHandler } from "../../functions/watchdog.ts";
import { TTL_ATTRIBUTE } from "../../shared/adapters/aws/dynamo-schema.ts";
import { RETENTION_MS } from "../../shared/domain/retention.ts";
import type { TaskView } from "../../shared/domain/task-view.ts";
import { CLAIM_LEASE_MARGIN_MS } from "../../shared/engine/claims.ts";
import type { AssistantDefinition, Engine } from "../../shared/engine/engine.ts";
import { rootTaskUrn } from "../../shared/engine/steps/planner.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { createAwsEngine } from "../../shared/runtime/aws/aws-engine.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import type { ConverseWireRequest, FakeBedrock } from "../peers/fake-bedrock.ts";
import type { LaggingIndex } from "../peers/lagging-dynamo.ts";
import { CrashAt } from "../scenarios/engine-harness.ts";
import { type AwsWorld, EventBridgePlayer, guarded, startAwsWorld, watchdogGuard } from "./aws-world.ts";

/**
 * Correct on DynamoDB. The engine on DynamoDB whose indexes lag (test/peers/lagging-dynamo.ts: every byParent and
 * byStatus read is served as of a few writes ago), driven as EventBridge drives it (the real step
 * handler, two warm instances, each wave of events delivered at once), with s3rver, the fake
 * Bedrock, fake Titan and fake S3 Vectors, as in engine-aws.int.test.ts. The index may find keys,
 * never decide: every run ends as it would with no lag, and nothing is left to the watchdog (the
 * watchdog never runs here). And a step that times out: Lambda's retry takes its work over.
 */
const TENANT = "acme";
const BUS = "arbor-lagging-test";
const LAG = 12;

const LEAD = { purpose: "Lead a project and combine its parts into one answer" };
const WORKER = { purpose: "Do one part of a project and report it in one line" };
const ASSISTANTS: AssistantDefinition[] = [
  { name: "Lead", id: "lead", ...LEAD },
  { name: "Worker", id: "worker", ...WORKER, tools: ["calculator"] },
];
const parts = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `Part ${i + 1}`, ...WORKER }));
/** Each request's text names its plan. */
const PLANS: Record<string, Record<string, unknown>> = {
  "six parts": { name: "Six parts", ...LEAD, subtasks: parts(6) },
  "three parts": { name: "Three parts", ...LEAD, subtasks: parts(3) },
  // One leaf, two turns: a calculator call, then the answer (its second turn is a command of its own).
  "one sum": { name: "Sum", ...WORKER },
};

function answer(request: ConverseWireRequest) {
  const forced = request.toolConfig?.toolChoice?.tool?.name;
  const prompt = request.messages?.[0]?.content?.[0]?.text ?? "";
  if (forced === "create_plan") {
    const plan = Object.entries(PLANS).find(([k]) => prompt.includes(k))?.[1];
    if (!plan) throw new Error(`no plan for ${prompt.slice(0, 80)}`);
    return { toolCalls: [{ name: "create_plan", arguments: plan }] };
  }
  if (forced === "report_evaluation") {
    const title = /# Task: (.*)/.exec(prompt)?.[1] ?? "?";
    return {
      toolCalls: [
        {
          name: "report_evaluation",
          arguments: { passed: true, reason: "all parts", answer: `${title}: all done` },
        },
      ],
    };
  }
  if (prompt.includes("# Task: Sum")) {
    const result = request.messages?.flatMap((m) => m.content ?? []).find((b) => b.toolResult)?.toolResult;
    if (!result) return { toolCalls: [{ name: "calculator", arguments: { a: 6, b: 7, op: "multiply" } }] };
    return { content: `Sum: ${result.content?.[0]?.text ?? "?"}` };
  }
  // Any leaf (and, with the bug this guards against, a parent run as a leaf) answers in one turn.
  return { content: `${/# Task: (.*)/.exec(prompt)?.[1] ?? "?"} finished` };
}

describe(`the engine on DynamoDB whose indexes lag ${LAG} writes`, () => {
  let world: AwsWorld;
  let bedrock: FakeBedrock;
  let config: AwsConfig;
  let lagging: LaggingIndex;
  let dynamodb: DynamoDBClient;
  let engineClients: AwsWorld["engineClients"];
  let rt: AwsRuntime;
  let engine: Engine;
  let handlers: StepHandler[];
  let clients: AwsWorld["clients"];
  /**
   * Plays EventBridge: each wave of events delivered at once, spread over the handler instances;
   * `drain(held)` leaves the events `held` says undelivered.
   */
  const { stepInput, deliver, drain, delivered, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => handlers,
  );

  beforeAll(async () => {
    // One lagging view of the table for every function instance, as one GSI serves them all.
    world = await startAwsWorld({ name: "arbor-lag", bus: BUS, model: answer, lag: LAG });
    ({ config, dynamodb, clients, engineClients } = world);
    bedrock = world.bedrock as FakeBedrock;
    lagging = world.lagging as LaggingIndex;
    rt = createAwsRuntime(config, clients);
    engine = await createAwsEngine(rt, config, { clients: engineClients });
    await engine.registerAssistants(TENANT, ASSISTANTS);
    const deps = {
      config: () => config,
      clients,
      engine: { clients: engineClients, settings: { turnStepMs: 0 } },
    };
    handlers = [createStepHandler(deps), createStepHandler(deps)];
  });

  afterAll(async () => {
    for (const h of handlers ?? []) await h.close();
    await rt?.close();
    await world?.close();
  });

  /** Every task below (and with) the root, read from the base records, whatever the index says. */
  const tree = async (rootId: string): Promise<[string, TaskView["status"], string | undefined][]> => {
    lagging.settle();
    const out: [string, TaskView["status"], string | undefined][] = [];
    const walk = async (id: string) => {
      const view = await rt.tasks.view(id);
      if (!view) return;
      out.push([view.title, view.status, (await engine.result(id)).output]);
      for (const child of await rt.tasks.children(id)) await walk(child.taskId);
    };
    await walk(rootId);
    return out.sort((a, b) => a[0].localeCompare(b[0]));
  };

  const ask = (text: string, mode: "eager" | "lazy" = "eager") =>
    engine.submit({ tenant: TENANT, text, actor: { id: "user_alice", kind: "human" }, mode });

  it("a lazy plan, approved, runs its six subtasks and then its root's evaluation", async () => {
    const { rootTaskId } = await ask("Run the project in six parts", "lazy");
    await drain();
    const [approval] = (await engine.deps.resources.descendants(rootTaskId, "uip.Interaction")).map(
      (r) => r.meta.id,
    );
    expect(approval).toBeDefined();
    await engine.respond(
      approval as string,
      { selectedOptionId: "approve" },
      { id: "user_alice", kind: "human" },
    );
    await drain();

    expect(await tree(rootTaskId)).toEqual([
      ...parts(6).map((p) => [p.name, "done", `${p.name} finished`]),
      ["Six parts", "done", "Six parts: all done"],
    ]);
    expect(lagging.stats.stale).toBeGreaterThan(0); // the index did lag under this run
  });

  it("a fan-out whose last siblings finish in the same wave is evaluated once, by one of them", async () => {
    const evaluationsBefore = bedrock.calls.filter(
      (c) => c.body.toolConfig?.toolChoice?.tool?.name === "report_evaluation",
    ).length;
    const { rootTaskId } = await ask("Run the project in three parts");
    await drain();

    // Ten minutes on, the index may still list finished work as running: the watchdog reads each
    // candidate's own record before it re-drives anything, and finds nothing to do.
    const later = new Date(Date.now() + config.watchdogStaleMs + 60_000);
    expect((await rt.tasks.stale("in_progress", later.toISOString())).map((t) => t.title)).toContain(
      "Three parts",
    );
    const watchdog = guarded(
      watchdogGuard(world),
      createWatchdogHandler({
        config: () => config,
        clients,
        engine: { clients: engineClients, clock: () => later },
      }),
    );
    try {
      expect(await watchdog({ "detail-type": "Scheduled Event" })).toEqual({ redriven: 0 });
    } finally {
      await watchdog.close();
    }
    expect(await tree(rootTaskId)).toEqual([
      ...parts(3).map((p) => [p.name, "done", `${p.name} finished`]),
      ["Three parts", "done", "Three parts: all done"],
    ]);
    expect(
      bedrock.calls.filter((c) => c.body.toolConfig?.toolChoice?.tool?.name === "report_evaluation").length -
        evaluationsBefore,
    ).toBe(1);
  });

  it("every event delivered again, in reverse order, changes nothing and calls no model", async () => {
    const requests = await Promise.all(
      [
        ...new Set(
          (await engine.deps.resources.descendantUrns(`cld:common.Tenant.${TENANT}`, "plan.Task")).filter(
            (u) => u.split("/plan.Task.").length === 2,
          ),
        ),
      ].map(async (root) => [root, await tree(root)] as const),
    );
    const calls = bedrock.calls.length;
    await deliver([...events()].reverse());
    await drain();
    for (const [root, before] of requests) expect(await tree(root)).toEqual(before);
    expect(bedrock.calls.length).toBe(calls);
  });

  for (const step of ["plan", "turn"] as const) {
    it(`a ${step} step killed by its timeout leaves its claim to Lambda's retry once the lease ends, not to the watchdog`, async () => {
      const { rootTaskId } = await ask(`Work out one sum (${step})`);
      // The request is one task: the plan step runs its first turn (a calculator call), as a
      // ready step would; the second turn is a command of its own.
      const killed = (e: BusEnvelope) =>
        step === "plan"
          ? e["detail-type"] === "PLAN_REQUESTED" && rootTaskUrn(String(e.detail.messageUrn)) === rootTaskId
          : e.detail.taskId === rootTaskId && e["detail-type"] === "TURN_REQUESTED" && e.detail.turn === 2;
      await drain(killed);
      const event = events().find(killed) as BusEnvelope;
      expect(event).toBeDefined();
      delivered.add(event.id);

      const t0 = Date.now();
      const handlerAt = (at: number, faults?: CrashAt) =>
        createStepHandler({
          config: () => config,
          clients,
          engine: {
            clients: engineClients,
            settings: { turnStepMs: 0 },
            clock: () => new Date(at + (Date.now() - t0)),
            ...(faults ? { faults } : {}),
          },
        });
      const run = async (handler: StepHandler, remainingMs: number) => {
        try {
          // The step's message, as its queue's event source hands it over: a failed one is reported.
          const result = await handler(stepInput(step, event), {
            getRemainingTimeInMillis: () => remainingMs,
          });
          if (result && result.batchItemFailures.length > 0)
            throw new Error("simulated crash: the message failed");
        } finally {
          await handler.close();
        }
      };
      // The invocation has 2 s left when it takes the turn's claim, calls the model, and dies (its timeout).
      await expect(run(handlerAt(t0, new CrashAt("after-llm", "turn")), 2_000)).rejects.toThrow(
        /simulated crash/,
      );
      const calls = bedrock.calls.length;

      // Delivered again while the lease holds (the step might still be running): nothing happens.
      await run(handlerAt(t0 + 20_000), 300_000);
      expect(bedrock.calls.length).toBe(calls);
      expect((await rt.tasks.view(rootTaskId))?.status).toBe("in_progress");

      // Lambda's retry, a minute after the timeout: the lease has ended, the retry takes the turn over.
      await run(handlerAt(t0 + 2_000 + CLAIM_LEASE_MARGIN_MS + 30_000), 300_000);
      expect(bedrock.calls.length).toBe(calls + 1);
      await drain();
      expect((await engine.result(rootTaskId)).output).toBe("Sum: 42");
    });
  }

  it("lets expire only what guards against repeats (guards, claims, done plan markers) or holds nothing (idle leaf slots), and that after 30 days", async () => {
    const items: Record<string, AttributeValue>[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await dynamodb.send(
        new ScanCommand({ TableName: config.tableName, ...(start ? { ExclusiveStartKey: start } : {}) }),
      );
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    const kindOf = (i: Record<string, AttributeValue>) => {
      const pk = i.pk?.S ?? "";
      if (pk.startsWith("I#")) return "guard";
      if (pk.startsWith("S#")) return "event";
      return `${i.kind?.S}${i.status?.S ? `:${i.status.S}` : ""}`;
    };
    const expiring = new Set(items.filter((i) => i[TTL_ATTRIBUTE]).map(kindOf));
    const kept = new Set(items.filter((i) => !i[TTL_ATTRIBUTE]).map(kindOf));
    // Idle leaf slots only where a bound on a request's leaves is set (not here: the engine's default).
    expect([...expiring].sort()).toEqual(["claim", "guard", "plan:done"]);
    // The event log, the task views, usage, child counts: never.
    for (const k of ["event", "task:done", "usage", "task-children"]) expect(kept).toContain(k);
    for (const k of expiring) expect(kept).not.toContain(k);
    const soonest = Math.min(
      ...items.flatMap((i) => (i[TTL_ATTRIBUTE]?.N ? [Number(i[TTL_ATTRIBUTE].N)] : [])),
    );
    expect(soonest * 1000).toBeGreaterThan(Date.now() + RETENTION_MS.claim - 60 * 60_000);
  });
});
