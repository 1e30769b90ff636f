import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { App } from "aws-cdk-lib";
import type { Template } from "aws-cdk-lib/assertions";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import type { IConstruct } from "constructs";
import { beforeAll, describe, expect, it } from "vitest";
import {
  MAX_RECEIVES,
  NOTIFY_BATCH_SIZE,
  NOTIFY_FUNCTION,
  NOTIFY_MAX_CONCURRENCY,
  NOTIFY_SWEEP_EVERY,
} from "../../../infra/constructs/notify-function.ts";
import { ENGINE_OUTPUT_KEYS, type EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { COMMANDS, SOURCE } from "../../../shared/engine/context.ts";
import { INTERACTION_REQUESTED } from "../../../shared/engine/interactions.ts";
import { compilePattern } from "../../../shared/kernel/event-pattern/index.ts";
import { NOTIFY_WAKE_PATTERN, NOTIFY_WAKE_RULE } from "../../../shared/notify/wakeups.ts";
import { synthesized } from "../../fixtures/synth.ts";
import { lazyChunksWithoutNames, logicalId } from "../../support/cdk.ts";

/**
 * The notify path as `cdk synth` makes it (cdk-nag included: a finding neither fixed nor
 * acknowledged fails the synthesis): the notify function with its own least-privilege role, the
 * wake and delivery queues, the wake rule, the sweep schedule, the API function's grant to queue,
 * the alarms. One synthesis for the whole file.
 */

interface CfnRes {
  Type: string;
  Properties: Record<string, unknown>;
}

let app: App;
let engine: EngineStack;
let t: Template;
const all = (type: string) => Object.entries(t.findResources(type) as Record<string, CfnRes>);
const props = (c: IConstruct) =>
  (t.toJSON().Resources as Record<string, CfnRes>)[logicalId(c)]?.Properties ?? {};
const flat = (v: unknown) => flattenCfnReference(v);
const arnOf = (c: IConstruct) => flat({ "Fn::GetAtt": [logicalId(c), "Arn"] });
const urlOf = (c: IConstruct) => flat({ Ref: logicalId(c) });
/** Every action a role's policies (managed and inline) allow. */
const statementsOf = (role: IConstruct): { Action: string | string[]; Resource: unknown }[] => {
  const roleProps = props(role);
  const managed = (roleProps.ManagedPolicyArns as unknown[]).map((ref) => flat(ref));
  const out: { Action: string | string[]; Resource: unknown }[] = [];
  for (const [id, p] of all("AWS::IAM::ManagedPolicy"))
    if (managed.includes(flat({ Ref: id })))
      out.push(...(p.Properties.PolicyDocument as { Statement: never[] }).Statement);
  for (const [, p] of all("AWS::IAM::Policy"))
    if ((p.Properties.Roles as unknown[]).some((r) => flat(r) === flat({ Ref: logicalId(role) })))
      out.push(...(p.Properties.PolicyDocument as { Statement: never[] }).Statement);
  return out;
};
const actionsOf = (role: IConstruct) =>
  new Set(statementsOf(role).flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action])));

// The prod app, synthesized once per test worker and shared with the other infra test files.
beforeAll(() => {
  ({ app, engine, template: t } = synthesized({ stage: "prod" }));
}, 600_000);

describe("the notify function", () => {
  it("runs functions/notify.ts with the delivery queue's URL, https webhooks only, and decides nothing", () => {
    const fn = props(engine.notify.handler.function);
    expect(fn.Timeout).toBe(NOTIFY_FUNCTION.timeout.toSeconds());
    const env = (fn.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(flat(env.ARBOR_NOTIFY_QUEUE_URL)).toBe(urlOf(engine.notify.deliveries));
    expect(env).toMatchObject({ ARBOR_MODE: "aws", ARBOR_POLICY_ENGINE: "cedar" });
    for (const k of ["ARBOR_MODEL", "ARBOR_MODEL_PROVIDER", "ARBOR_VECTOR_BUCKET", "ARBOR_TOOL_FUNCTION"])
      expect(env[k]).toBeUndefined();
    // No function of the stack may reach a loopback receiver (loadConfig refuses the switch on Lambda too).
    for (const [, f] of all("AWS::Lambda::Function")) {
      const vars = (f.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables;
      expect(vars?.ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP).toBeUndefined();
    }
  });

  it("may read tasks and answers and write subscriptions and deliveries: no model, no tool, no publishing", () => {
    const actions = actionsOf(engine.notify.handler.role);
    for (const a of ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "s3:GetObject"])
      expect(actions).toContain(a);
    for (const a of [
      "sqs:SendMessage",
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
    ])
      expect(actions).toContain(a);
    for (const a of actions) expect(a).not.toMatch(/^(bedrock|s3vectors|lambda|events):/);
    for (const a of ["s3:PutObject", "s3:DeleteObject", "dynamodb:DeleteItem", "dynamodb:Scan"])
      expect(actions).not.toContain(a);
    // The queues it sends to and reads from are its own two.
    const sqsResources = statementsOf(engine.notify.handler.role)
      .filter((s) => [s.Action].flat().some((a) => a.startsWith("sqs:")))
      .flatMap((s) => [s.Resource].flat().map(flat));
    expect(new Set(sqsResources)).toEqual(
      new Set([arnOf(engine.notify.wakeQueue), arnOf(engine.notify.deliveries)]),
    );
  });

  it("is its own bundle, which loads on its own and says what to set before touching AWS", () => {
    const key = (props(engine.notify.handler.function).Code as { S3Key: string }).S3Key;
    // What it loads with import() has its names (function-bundle.ts splits it into chunks).
    expect(lazyChunksWithoutNames(join(app.outdir, `asset.${key.replace(/\.zip$/, "")}`))).toEqual([]);
    const bundle = pathToFileURL(join(app.outdir, `asset.${key.replace(/\.zip$/, "")}`, "index.mjs")).href;
    const script = `
      const { handler } = await import(${JSON.stringify(bundle)});
      try { await handler({ notify: "sweep" }); process.stdout.write("no error\\n"); }
      catch (e) { process.stdout.write(e.name + ": " + e.message + "\\n"); }`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      env: { PATH: process.env.PATH, POWERTOOLS_LOG_LEVEL: "SILENT" },
      encoding: "utf8",
    });
    expect(out).toMatch(/^ConfigError: .*ARBOR_MODE=aws/);
  });

  it("is alarmed on through its queues (their oldest message, the dead-letter queue), not on each retried failure", () => {
    const names = all("AWS::CloudWatch::Alarm").map(([id]) => id);
    expect(names.some((n) => n.includes("NotifyFunctionErrors"))).toBe(false);
    expect(names.some((n) => n.includes("NotifyDeliveriesOldestMessage"))).toBe(true);
    expect(names.some((n) => n.includes("NotifyWakeupsOldestMessage"))).toBe(true);
    expect(names.some((n) => n.includes("DeadLetters"))).toBe(true);
  });

  it("says where it and its queue are", () => {
    const outputs = t.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(flat(outputs[ENGINE_OUTPUT_KEYS.notifyQueue]?.Value)).toBe(urlOf(engine.notify.deliveries));
    expect(outputs[ENGINE_OUTPUT_KEYS.notify]).toBeDefined();
  });
});

describe("the wake and delivery queues", () => {
  it("are encrypted, SSL only, hide a message six function timeouts, and dead-letter after MAX_RECEIVES failures", () => {
    for (const q of [engine.notify.wakeQueue, engine.notify.deliveries]) {
      const p = props(q);
      expect(p.SqsManagedSseEnabled).toBe(true);
      expect(p.VisibilityTimeout).toBeGreaterThanOrEqual(6 * NOTIFY_FUNCTION.timeout.toSeconds());
      const redrive = p.RedrivePolicy as { deadLetterTargetArn: unknown; maxReceiveCount: number };
      expect(redrive.maxReceiveCount).toBe(MAX_RECEIVES);
      expect(flat(redrive.deadLetterTargetArn)).toBe(
        flat(engine.resolve(engine.storage.deadLetterQueue.queueArn)),
      );
      const policies = all("AWS::SQS::QueuePolicy").filter(([, qp]) =>
        (qp.Properties.Queues as unknown[]).some((u) => flat(u) === urlOf(q)),
      );
      const statements = policies.flatMap(
        ([, qp]) => (qp.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement,
      );
      expect(statements).toContainEqual(
        expect.objectContaining({
          Effect: "Deny",
          Condition: { Bool: { "aws:SecureTransport": "false" } },
        }),
      );
    }
  });

  it("feed the notify function in batches, reporting the messages that failed, with a bound on concurrent invocations", () => {
    const mappings = all("AWS::Lambda::EventSourceMapping").map(([, m]) => m.Properties);
    const fn = flat({ Ref: logicalId(engine.notify.handler.function) });
    const ours = mappings.filter((m) => flat(m.FunctionName) === fn);
    expect(ours.map((m) => flat(m.EventSourceArn)).sort()).toEqual(
      [arnOf(engine.notify.wakeQueue), arnOf(engine.notify.deliveries)].sort(),
    );
    for (const m of ours)
      expect(m).toMatchObject({
        BatchSize: NOTIFY_BATCH_SIZE,
        FunctionResponseTypes: ["ReportBatchItemFailures"],
        ScalingConfig: { MaximumConcurrency: NOTIFY_MAX_CONCURRENCY },
      });
  });

  it("an alarm tells the topic when a delivery, or a wake-up, waits too long in its queue", () => {
    const alarms = all("AWS::CloudWatch::Alarm")
      .map(([, a]) => a.Properties)
      .filter((a) => a.MetricName === "ApproximateAgeOfOldestMessage")
      .filter((a) => !JSON.stringify(a.Dimensions).includes("Commands"));
    expect(alarms).toHaveLength(2);
    const on = (queue: Queue) =>
      (alarms as Record<string, unknown>[]).find((a) =>
        JSON.stringify(a.Dimensions).includes(logicalId(queue)),
      );
    const deliveries = on(engine.notify.deliveries);
    expect(deliveries).toMatchObject({ Namespace: "AWS/SQS", Statistic: "Maximum", Threshold: 1200 });
    expect(String(deliveries?.AlarmDescription)).toMatch(/20 minutes/);
    const wakeups = on(engine.notify.wakeQueue);
    expect(wakeups).toMatchObject({ Namespace: "AWS/SQS", Statistic: "Maximum", Threshold: 300 });
    expect(String(wakeups?.AlarmDescription)).toMatch(/5 minutes in the notify wake queue/);
  });

  it("the API function may queue deliveries (what it records), and knows where", () => {
    const env = (props(engine.api.function.function).Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(flat(env.ARBOR_NOTIFY_QUEUE_URL)).toBe(urlOf(engine.notify.deliveries));
    const sends = statementsOf(engine.api.function.role).filter((s) =>
      [s.Action].flat().includes("sqs:SendMessage"),
    );
    // And the plan, resume and turn commands (a remote agent's push goes on with the leaf's turn).
    expect(sends.flatMap((s) => [s.Resource].flat().map(flat)).sort()).toEqual(
      [
        arnOf(engine.notify.deliveries),
        arnOf(engine.commandQueues.plan.queue),
        arnOf(engine.commandQueues.resume.queue),
        arnOf(engine.commandQueues.turn.queue),
      ].sort(),
    );
  });
});

describe("the wake rule and the sweep schedule", () => {
  it("send the engine's wake-up events, one $or pattern, to the wake queue, dead-lettering what cannot be sent", () => {
    const rule = props(engine.notify.wakeRule);
    expect(rule.Name).toBe(NOTIFY_WAKE_RULE);
    expect(rule.EventPattern).toEqual(NOTIFY_WAKE_PATTERN);
    const targets = rule.Targets as Record<string, unknown>[];
    expect(targets).toHaveLength(1);
    expect(flat(targets[0]?.Arn)).toBe(arnOf(engine.notify.wakeQueue));
    expect(flat((targets[0]?.DeadLetterConfig as { Arn: unknown } | undefined)?.Arn)).toBe(
      flat(engine.resolve(engine.storage.deadLetterQueue.queueArn)),
    );
    // The pattern as deployed matches each wake-up and not a step's own command.
    const matches = compilePattern(rule.EventPattern as never);
    const event = (source: string, detailType: string, detail: Record<string, unknown> = {}) => ({
      version: "0",
      id: "e",
      source,
      "detail-type": detailType,
      account: "1",
      time: "2026-11-25T00:00:00Z",
      region: "us-east-1",
      resources: [],
      detail,
    });
    expect(matches(event("arbor", COMMANDS.resourcePut, { name: "output" }))).toBe(true);
    expect(matches(event("arbor", COMMANDS.resourcePut, { name: "notes" }))).toBe(false);
    expect(matches(event(SOURCE, INTERACTION_REQUESTED))).toBe(true);
    expect(matches(event(SOURCE, COMMANDS.ready))).toBe(true);
    expect(matches(event(SOURCE, COMMANDS.turn))).toBe(false);
  });

  it("the wake queue admits this rule only", () => {
    const statements = all("AWS::SQS::QueuePolicy")
      .filter(([, qp]) =>
        (qp.Properties.Queues as unknown[]).some((u) => flat(u) === urlOf(engine.notify.wakeQueue)),
      )
      .flatMap(
        ([, qp]) => (qp.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement,
      )
      .filter((s) => s.Effect === "Allow");
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatchObject({ Principal: { Service: "events.amazonaws.com" } });
    expect(
      flat(
        (statements[0]?.Condition as { ArnEquals: Record<string, unknown> } | undefined)?.ArnEquals[
          "aws:SourceArn"
        ],
      ),
    ).toBe(arnOf(engine.notify.wakeRule));
  });

  it("runs the sweep on a schedule", () => {
    const schedule = props(engine.notify.sweepSchedule);
    expect(schedule.ScheduleExpression).toBe(`rate(${NOTIFY_SWEEP_EVERY.toMinutes()} minutes)`);
    const [target] = schedule.Targets as Record<string, unknown>[];
    expect(flat(target?.Arn)).toBe(arnOf(engine.notify.handler.function));
    expect(JSON.parse(String(target?.Input))).toEqual({ notify: "sweep" });
  });
});
