import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWatchdogHandler, type WatchdogHandler } from "../../functions/watchdog.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { Experiment } from "../../shared/evals/experiment.ts";
import type { ConverseWireRequest, FakeBedrock } from "../peers/fake-bedrock.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type AwsFunctions, startAwsFunctions } from "./aws-functions.ts";
import { type AwsWorld, EventBridgePlayer, guarded, startAwsWorld, watchdogGuard } from "./aws-world.ts";

/**
 * An experiment started through the API function and driven by the functions the engine stack
 * deploys: the experiments' rule (EVAL_ROUTE) invokes the step bundle with `eval` for the events of
 * the experiment's requests only; it answers their questions, scores each run (a judge through the
 * fake Bedrock with the real SDK client) and launches the next. Every event delivered again, newest
 * first, scores nothing twice and calls no model; the watchdog's sweep finds nothing left to do.
 * The table's indexes lag behind its writes throughout: an experiment whose runs an index does not
 * list yet is not one without runs, and one whose last run was just scored ends at once.
 */
const TENANT = "acme";
const BUS = "arbor-eval";
const TOOL_FUNCTION = "arbor-eval-tools";
const root = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });
const GUIDE = { purpose: "Answer questions about the offsite" };
const TEAM = { assistants: [{ name: "Guide", id: "guide", ...GUIDE }] };

const planned = planningModel({
  plan: { name: "Answer", ...GUIDE },
  evaluation: { reason: "answered" },
  leaf: () => ({ content: "Lisbon, at the LX Factory loft." }),
});
const model = (request: ConverseWireRequest) =>
  request.toolConfig?.toolChoice?.tool?.name === "report_score"
    ? { toolCalls: [{ name: "report_score", arguments: { score: 0.8, reason: "It names the city" } }] }
    : planned(request);

const DATASET = [
  '{"id":"where","request":"Where is the offsite?","expect":{"contains":["Lisbon"],"judge":{"criteria":"Names the city"}}}',
  '{"id":"lazy","request":"Where is it, again?","mode":"lazy","expect":{"approval":"needed","contains":["LX Factory"]}}',
  '{"id":"wrong","request":"And once more?","expect":{"contains":["Porto"]}}',
].join("\n");

describe("an experiment on the AWS functions, offline", () => {
  let world: AwsWorld;
  let fns: AwsFunctions;
  let watchdog: WatchdogHandler;
  const { deliver, drain, routesOf, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => fns.steps,
  );

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-eval",
      bus: BUS,
      model,
      // The table's indexes serve reads a few writes behind, as DynamoDB's GSIs may.
      lag: 3,
      env: {
        ARBOR_STAGE: "eval",
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
      },
    });
    fns = await startAwsFunctions(world, TOOL_FUNCTION, [root.entry]);
    watchdog = guarded(watchdogGuard(world), createWatchdogHandler(fns.stepDeps));
  });

  afterAll(async () => {
    await watchdog?.close();
    await fns?.close();
    await world?.close();
  });

  it("runs a kept dataset: every case answered, judged and scored once, however often its events come", async () => {
    const admin = fns.as(root.key);
    const bedrock = world.bedrock as FakeBedrock;
    expect((await admin.put("/v1/admin/team", TEAM)).status).toBe(200);
    expect((await admin.put("/v1/evals/datasets/offsite", { text: DATASET })).status).toBe(200);
    const started = await admin.post("/v1/evals/experiments", { dataset: "offsite", concurrency: 2 });
    expect(started.status).toBe(202);
    const id = (started.json.experiment as Experiment).id;
    await drain();

    const read = async () =>
      ((await admin.get(`/v1/evals/experiments/${id}`)).json as { experiment: Experiment }).experiment;
    const done = await read();
    expect(done.status).toBe("done");
    expect(done.runs.map((r) => [r.caseId, r.status, r.score]).sort()).toEqual([
      ["lazy", "done", 1],
      ["where", "done", 0.9333333333333332],
      ["wrong", "done", 0.5],
    ]);
    const judged = done.runs.find((r) => r.caseId === "where")?.scores.find((s) => s.scorer === "judge");
    expect(judged).toMatchObject({
      score: 0.8,
      reason: "It names the city",
      judge: { model: expect.any(String) },
    });
    // Only the experiment's requests reach its rule: a request of someone else's does not.
    const other = await admin.post("/v1/messages", { text: "Where is the offsite?" });
    await drain();
    const theirs = events().filter((e) =>
      String(e.detail.urn ?? e.detail.taskId ?? "").includes(
        String(other.json.rootTaskId).split("/common.Message.")[0] as string,
      ),
    );
    expect(theirs.length).toBeGreaterThan(0);
    expect(theirs.filter((e) => routesOf(e).includes("eval"))).toEqual([]);

    // Everything again, newest first, then the watchdog's sweep: nothing scored twice, no model call.
    const calls = bedrock.calls.length;
    await deliver([...events()].reverse());
    await drain();
    await watchdog({});
    expect(bedrock.calls.length).toBe(calls);
    const again = await read();
    expect(again.runs).toHaveLength(3);
    expect(again.score).toBe(done.score);
    expect(again.durationMs).toBe(done.durationMs);
  });
});
