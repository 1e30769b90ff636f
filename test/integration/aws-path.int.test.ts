import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AwsCallLog, LATENCIES, type PathCost, type PublishedEvent } from "../../bench/aws-path-model.ts";
import { createApiHandler } from "../../functions/api.ts";
import type { StepHandler } from "../../functions/engine-step.ts";
import { DEFAULT_STEP_CONCURRENCY, defaultLeavesAtOnce } from "../../infra/constructs/command-queue.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { requestOf } from "../../shared/notify/wakeups.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type AwsFunctions, startAwsFunctions } from "./aws-functions.ts";
import { type AwsWorld, apiGuard, EventBridgePlayer, guarded, startAwsWorld } from "./aws-world.ts";

/**
 * The AWS path of a request, counted: the 1-task and 7-task (3 levels) requests through the
 * functions the engine stack deploys (the API, the engine steps, the tool function), offline, with
 * the engine's deployed settings and every AWS SDK call counted (bench/aws-path-model.ts). Each
 * leaf makes one tool call. It prints, per request: the AWS calls, the EventBridge deliveries, the
 * hops and sequential round trips on the critical path (from the API's PutEvents to the
 * announcement of the root's output), and the path's warm time modelled from published latencies,
 * without the model. `npm run bench:aws` runs it with the 111-task request too.
 *
 * What it checks is the counting, not a speed: the path exists and starts at the API, each request
 * crosses at least one hop (the API's to the plan step, which runs the first leaf itself), and a
 * bigger tree costs more calls.
 */
const TENANT = "acme";
const BUS = "arbor-aws-path";
const TOOL_FUNCTION = "arbor-aws-path-tools";
const root = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });
/** A tenant's first request, on an API function that just started: its cold path. */
const newcomer = newApiKey({ id: "user_new", kind: "human", tenant: "newco", roles: [] });
const WORKER = { purpose: "Calculate costs and count words of the project's texts", tools: ["calculator"] };
const TEAM = { assistants: [{ name: "Worker", id: "worker", ...WORKER }] };
const WITH_111 = process.env.ARBOR_BENCH_AWS === "1";
/**
 * Leaves of one request at once (engine/leaf-slots.ts): the engine stack's default, or
 * ARBOR_BENCH_LEAVES_AT_ONCE (0: no bound). With the default, the 111-task request's 100 leaves run
 * in waves, each wave on the path.
 */
const LEAVES_AT_ONCE = Number(
  process.env.ARBOR_BENCH_LEAVES_AT_ONCE ?? defaultLeavesAtOnce(DEFAULT_STEP_CONCURRENCY),
);
/**
 * Leaves of one request at once while the leaf steps have room (the other requests' commands in the
 * ready and turn queues, waiting or taken, fewer than the room above the bound): the engine stack's
 * default (the steps' concurrency), or ARBOR_BENCH_LEAVES_WHEN_IDLE (0: the bound always holds).
 */
const LEAVES_WHEN_IDLE = Number(
  process.env.ARBOR_BENCH_LEAVES_WHEN_IDLE ?? (LEAVES_AT_ONCE ? DEFAULT_STEP_CONCURRENCY : 0),
);

/**
 * A plan of 1 + children x (1 + leaves) tasks on three levels (one leaf when there are no
 * children), every task worded as the one assistant's purpose, so that each is elected without a
 * question (the fake embeddings measure likeness by the words).
 */
function plan(children: number, leaves: number): Record<string, unknown> {
  const task = (name: string, subtasks?: unknown[]) => ({
    name,
    purpose: WORKER.purpose,
    ...(subtasks ? { evaluation: "Every part reported its result", subtasks } : {}),
  });
  if (children === 0) return task("Compute the cost per person");
  return task(
    "Prepare the project report",
    Array.from({ length: children }, (_, c) =>
      task(
        `Workstream ${c + 1}`,
        Array.from({ length: leaves }, (_, l) => task(`Item ${l + 1} of workstream ${c + 1}`)),
      ),
    ),
  );
}

/** One leaf; 1 + 2 x (1 + 2) = 7 tasks; W1's shape, 1 + 10 x (1 + 10) = 111 tasks. */
const PLANS: Record<string, Record<string, unknown>> = {
  "1 task": plan(0, 0),
  "7 tasks (3 levels)": plan(2, 2),
  ...(WITH_111 ? { "111 tasks": plan(10, 10) } : {}),
};
let current = "1 task";
/**
 * Each AWS call waits its modelled latency times this before it reaches the local peer
 * (bench/aws-path-model.ts), so that what runs at once is what would on AWS: 1 under
 * `npm run bench:aws`, 0 (no wait) in the test run, or ARBOR_BENCH_AWS_LATENCY.
 */
const LATENCY_SCALE = Number(process.env.ARBOR_BENCH_AWS_LATENCY ?? (WITH_111 ? 1 : 0));

const model = (request: Parameters<ReturnType<typeof planningModel>>[0]) =>
  planningModel({
    plan: PLANS[current] as Record<string, unknown>,
    evaluation: { reason: "every part reported", answer: "done" },
    leaf: ({ toolResult }) =>
      toolResult === undefined
        ? { toolCalls: [{ name: "calculator", arguments: { a: 1200, b: 12, op: "divide" } }] }
        : { content: `100 each (${toolResult})` },
  })(request);

interface Row {
  request: string;
  calls: number;
  deliveries: number;
  path: PathCost;
  top: string;
}

describe("the AWS path of a request, counted", () => {
  let world: AwsWorld;
  let fns: AwsFunctions;
  const log = new AwsCallLog({ latencyScale: LATENCY_SCALE });
  let steps: StepHandler[] = [];
  const { drain } = new EventBridgePlayer(
    () => world,
    BUS,
    () => steps,
  );
  const rows: Row[] = [];
  let coldRow = "";

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-aws-path",
      bus: BUS,
      model,
      env: {
        ARBOR_STAGE: "path",
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
      },
    });
    fns = await startAwsFunctions(world, TOOL_FUNCTION, [root.entry, newcomer.entry], {
      client: (c) => log.instrument(c),
      tool: (event, run) =>
        log.within(
          { kind: "tool", name: String((event as { op?: string }).op), payload: JSON.stringify(event) },
          run,
        ),
      // As deployed (a leaf's turns go on in one step while it has time), but every task is
      // elected: the fake embeddings' likeness of a task's name to the purpose would ask a person.
      engineSettings: {
        electionThreshold: -1,
        leavesAtOnce: LEAVES_AT_ONCE,
        leavesWhenIdle: LEAVES_WHEN_IDLE,
      },
    });
    // Each step invocation is one invocation of the log, started by the event it was given.
    steps = fns.steps.map((handler) =>
      Object.assign(
        (input: unknown) => {
          // A rule's input, or a batch of one from the step's command queue.
          const records = (input as { Records?: { body: string }[] }).Records;
          const { subscription, event } = (records ? JSON.parse(records[0]?.body ?? "{}") : input) as {
            subscription: string;
            event: { id: string; detail: Record<string, unknown> };
          };
          const trigger = String(event.detail["arbor-event-id"] ?? event.id);
          return log.within(
            { kind: "step", name: subscription, trigger, via: records ? "sqs" : "eventbridge" },
            () => handler(input),
          );
        },
        { close: handler.close },
      ),
    );
    const admin = fns.as(root.key);
    expect((await admin.put("/v1/admin/team", TEAM)).status).toBe(200);
    // A first request warms the tenant (its tools registered, its team given): the rows are warm.
    await admin.post("/v1/messages", { text: "Warm up" });
    await drain();
  });

  afterAll(async () => {
    await fns?.close();
    await world?.close();
    if (rows.length === 0) return;
    const lines = [
      "",
      `AWS path, warm, without the model, ${LEAVES_AT_ONCE ? `${LEAVES_AT_ONCE} leaves of a request at once (${LEAVES_WHEN_IDLE || LEAVES_AT_ONCE} while the leaf steps have room)` : "every leaf of a request at once"} (latencies: ${Object.entries(
        LATENCIES,
      )
        .map(([k, v]) => `${k} ${v} ms`)
        .join(
          ", ",
        )}${LATENCY_SCALE ? `; each call waited ${LATENCY_SCALE}x its latency before the local peer` : "; the local peers' own timing"})`,
      "| request | AWS calls | deliveries | EventBridge + SQS hops on the path | round trips on the path | modelled time on the path | most calls |",
      "|---|---|---|---|---|---|---|",
      ...rows.map(
        (r) =>
          `| ${r.request} | ${r.calls} | ${r.deliveries} | ${r.path.hops} + ${r.path.queueHops} | ${r.path.roundTrips} | ${(r.path.modelledMs / 1000).toFixed(2)} s | ${r.top} |`,
      ),
      "",
      ...rows.map(
        (r) =>
          `${r.request}, the path: ${r.path.legs.map((l) => `${l.name} ${l.roundTrips} (${Math.round(l.modelledMs)} ms)`).join(" -> ")}`,
      ),
    ];
    process.stdout.write(`${lines.join("\n")}\n${coldRow ? `${coldRow}\n` : ""}`);
  });

  it("takes a new tenant's first request on a cold API function without waiting on the tool function", async () => {
    current = "1 task";
    const cold = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => world.config,
        clients: world.clients,
        engine: { clients: { ...world.engineClients, lambda: fns.toolPeer.client() } },
      }),
    );
    try {
      log.clear();
      const started = performance.now();
      const res = await log.within({ kind: "api", name: "POST /v1/messages (cold, new tenant)" }, () =>
        cold(apiEvent("POST", "/v1/messages", { key: newcomer.key, body: { text: "Hello" } }), {
          awsRequestId: "cold-1",
        }),
      );
      const wallMs = performance.now() - started;
      expect(res.statusCode).toBe(202);
      const planned = (e: PublishedEvent) => e.detailType === "PLAN_REQUESTED";
      const path = log.criticalPath(planned) as PathCost;
      // Neither ListTools nor RegisterTools in its path: the tool function is asked beside it.
      const invokesBefore = log.calls.filter(
        (c) =>
          c.service === "Lambda" && c.start < (log.calls.find((x) => x.published.some(planned))?.start ?? 0),
      );
      const awaited = invokesBefore.filter(
        (c) => c.end <= (log.calls.find((x) => x.published.some(planned))?.start ?? 0),
      );
      expect(awaited.map((c) => c.payload)).toEqual([]);
      coldRow = `API function, cold, a new tenant's first request (its default team given): ${path.roundTrips} round trips, modelled ${Math.round(path.modelledMs)} ms, ${Math.round(wallMs)} ms here; tool function Invokes waited for: ${awaited.length}`;
    } finally {
      await cold.close();
    }
    await drain();
  }, 300_000);

  for (const request of Object.keys(PLANS))
    it(`counts the calls, hops and round trips of a ${request} request`, async () => {
      current = request;
      log.clear();
      const sent = await log.within({ kind: "api", name: "POST /v1/messages" }, () =>
        fns.as(root.key).post("/v1/messages", { text: `Please do the ${request} work` }),
      );
      expect(sent.status).toBe(202);
      const rootTask = String(sent.json.rootTaskId);
      await drain();
      // The tool function kept to its grants (infra/constructs/grants.ts).
      expect(fns.toolGuard.denied).toEqual([]);
      // Every call was made in an invocation the log knows (none unattributed).
      expect(log.calls.filter((c) => c.invocation < 0).map((c) => `${c.service} ${c.op}`)).toEqual([]);
      const calls = log.calls.length;
      const done = await fns.as(root.key).get(`/v1/tasks/${encodeURIComponent(rootTask)}`);
      expect(done.json).toMatchObject({ task: { status: "done" } });

      const isRootOutput = (e: PublishedEvent) =>
        e.detail.name === "output" &&
        typeof e.detail.urn === "string" &&
        requestOf(e.detail.urn) === rootTask &&
        e.detail.urn.split("/").length === rootTask.split("/").length + 1;
      const path = log.criticalPath(isRootOutput);
      expect(path, "a path from the API to the root's output").toBeDefined();
      const cost = path as PathCost;
      expect(cost.hops + cost.queueHops).toBeGreaterThanOrEqual(1);
      expect(cost.roundTrips).toBeGreaterThan(cost.hops + cost.queueHops);
      expect(cost.roundTrips).toBeLessThanOrEqual(calls);
      const top = log
        .byOperation()
        .slice(0, 3)
        .map(([op, n]) => `${op} ${n}`)
        .join(", ");
      if (process.env.ARBOR_BENCH_AWS_DETAIL)
        for (const leg of cost.legs)
          process.stdout.write(
            `${request}, ${leg.name} on the path:\n${log
              .roundTripsOf(leg.invocation, process.env.ARBOR_BENCH_AWS_DETAIL === "keys")
              .map((w, i) => `  ${i + 1}. ${w}`)
              .join("\n")}\n`,
          );
      rows.push({ request, calls, deliveries: log.deliveries(), path: cost, top });
      if (rows.length > 1) {
        const [small, big] = [rows[rows.length - 2] as Row, rows[rows.length - 1] as Row];
        expect(big.calls).toBeGreaterThan(small.calls);
      }
    }, 300_000);
});
