import type { Template } from "aws-cdk-lib/assertions";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import { beforeAll, describe, expect, it } from "vitest";
import { ALARMS, OPS_OUTPUT_KEYS } from "../../../infra/constructs/ops-alarms.ts";
import type { EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { STORAGE_OUTPUT_KEYS, type StorageStack } from "../../../infra/stacks/storage-stack.ts";
import { ROUTES } from "../../../shared/engine/routes.ts";
import { synthesized } from "../../fixtures/synth.ts";

/**
 * The operations of the engine stack: alarms (dead letters, every function's errors and
 * throttles, watchdog re-drives) on one SNS topic, the EMF metrics' namespace and stage, and the
 * outputs that say where things are. The app is synthesized as `cdk synth` does it, cdk-nag
 * included (a finding neither fixed nor acknowledged fails the synthesis).
 */

interface CfnRes {
  Type: string;
  Properties: Record<string, unknown>;
}

let engine: EngineStack;
let storage: StorageStack;
let template: Template;
let withEmail: Template;

// The prod app is synthesized once per test worker and shared with the other infra test files.
beforeAll(() => {
  ({ engine, storage, template } = synthesized({ stage: "prod" }));
  withEmail = synthesized({ stage: "dev", alarmEmail: "ops@example.com" }).template;
}, 600_000);

const alarms = (t: Template) =>
  Object.values(t.findResources("AWS::CloudWatch::Alarm") as Record<string, CfnRes>).map((r) => r.Properties);
const flat = (v: unknown) => flattenCfnReference(v);
const topicRef = () => ({ Ref: engine.getLogicalId(engine.ops.topic.node.defaultChild as never) });

describe("operations of the engine stack", () => {
  it("alarm when the dead-letter queue holds anything", () => {
    const dlq = alarms(template).filter(
      (a) => a.Namespace === "AWS/SQS" && a.MetricName === "ApproximateNumberOfMessagesVisible",
    );
    expect(dlq).toHaveLength(1);
    expect(dlq[0]).toMatchObject({
      MetricName: "ApproximateNumberOfMessagesVisible",
      Statistic: "Maximum",
      Period: ALARMS.deadLetters.period.toSeconds(),
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      EvaluationPeriods: 1,
      TreatMissingData: "notBreaching",
      AlarmActions: [topicRef()],
      OKActions: [topicRef()],
    });
    // The queue is the storage stack's, found by the name in its ARN.
    expect(flat(dlq[0]?.Dimensions)).toContain(STORAGE_OUTPUT_KEYS.deadLetterQueueArn);
  });

  it("alarm on the errors and throttles of the functions a caller waits on (API, tool function), not on every retried step's", () => {
    const lambda = alarms(template).filter((a) => a.Namespace === "AWS/Lambda");
    const ref = (fn: { node: { defaultChild?: unknown } }) => ({
      Ref: engine.getLogicalId(fn.node.defaultChild as never),
    });
    const on = (fn: { node: { defaultChild?: unknown } }, metric: string) =>
      lambda.filter(
        (a) =>
          a.MetricName === metric &&
          JSON.stringify(a.Dimensions) === JSON.stringify([{ Name: "FunctionName", Value: ref(fn) }]),
      );
    for (const fn of [engine.tools.handler.function, engine.api.function.function]) {
      expect(on(fn, "Errors")).toEqual([
        expect.objectContaining({ Statistic: "Sum", Period: 300, Threshold: ALARMS.calleeErrors.threshold }),
      ]);
      expect(on(fn, "Throttles")).toEqual([
        expect.objectContaining({ Statistic: "Sum", Period: 300, Threshold: 1, AlarmActions: [topicRef()] }),
      ]);
    }
    // The watchdog: two failed runs of three.
    expect(on(engine.watchdog.function, "Errors")).toEqual([
      expect.objectContaining({ Period: 900, Threshold: 2 }),
    ]);
    // And no alarm of a step's own: 5 in all, where there were two per function (24).
    for (const route of ROUTES) expect(on(engine.steps[route.name].function, "Errors")).toEqual([]);
    expect(on(engine.notify.handler.function, "Errors")).toEqual([]);
    expect(lambda).toHaveLength(5);
  });

  it("alarm on the steps' failures summed over their routes: ten in 15 minutes (each is retried)", () => {
    const found = Object.values(template.findResources("AWS::CloudWatch::Alarm"))
      .map((r) => r.Properties as Record<string, unknown>)
      .filter((a) => JSON.stringify(a.Metrics ?? "").includes("StepFailed"));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({
      Threshold: ALARMS.stepFailures.threshold,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      TreatMissingData: "notBreaching",
    });
    const [query] = (found[0]?.Metrics ?? []) as { Expression: string; Period: number }[];
    expect(query?.Expression).toBe(
      "SELECT SUM(StepFailed) FROM SCHEMA(\"Arbor\", route, service, stage) WHERE service = 'arbor' AND stage = 'prod'",
    );
    expect(query?.Period).toBe(900);
  });

  it("alarm on watchdog re-drives, the EMF metric the watchdog writes under its stage", () => {
    const redrives = alarms(template).filter((a) => a.Namespace === "Arbor");
    expect(redrives).toEqual([
      expect.objectContaining({
        MetricName: "WatchdogRedriven",
        Dimensions: expect.arrayContaining([
          { Name: "service", Value: "arbor" },
          { Name: "stage", Value: "prod" },
        ]),
        Statistic: "Sum",
        Period: ALARMS.watchdogRedrives.period.toSeconds(),
        Threshold: 1,
        ComparisonOperator: "GreaterThanOrEqualToThreshold",
        AlarmActions: [topicRef()],
      }),
    ]);
    // The functions write their metrics with that stage.
    const envs = Object.values(template.findResources("AWS::Lambda::Function") as Record<string, CfnRes>).map(
      (f) => (f.Properties.Environment as { Variables: Record<string, unknown> }).Variables,
    );
    expect(envs.length).toBeGreaterThan(0);
    for (const vars of envs) expect(vars.ARBOR_STAGE).toBe("prod");
  });

  it("alarm on the HTTP API's 5xx and p99 latency, the table's throttles and the model's", () => {
    const apiId = { Ref: engine.getLogicalId(engine.api.gateway.api.node.defaultChild as never) };
    const api = alarms(template).filter((a) => a.Namespace === "AWS/ApiGateway");
    expect(api.map((a) => [a.MetricName, a.Statistic ?? a.ExtendedStatistic, a.Threshold]).sort()).toEqual([
      ["5xx", "Sum", ALARMS.api5xx.threshold],
      ["Latency", "p99", ALARMS.apiLatencyP99.threshold],
    ]);
    for (const a of api) expect(a.Dimensions).toContainEqual({ Name: "ApiId", Value: apiId });
    const table = alarms(template).find((a) =>
      JSON.stringify(a.Metrics ?? "").includes("ReadThrottleEvents"),
    );
    expect(JSON.stringify(table?.Metrics)).toContain("WriteThrottleEvents");
    expect(table).toMatchObject({ Threshold: 1, AlarmActions: [topicRef()] });
    const model = alarms(template).filter((a) => a.Namespace === "AWS/Bedrock");
    expect(model).toEqual([
      expect.objectContaining({
        MetricName: "InvocationThrottles",
        Dimensions: [{ Name: "ModelId", Value: expect.any(String) }],
        Threshold: ALARMS.modelThrottles.threshold,
      }),
    ]);
  });

  it("reserve concurrency for the API and tool functions when asked, and refuse a bad number", () => {
    const reserved = (t: Template, fn: { node: { defaultChild?: unknown } }) =>
      (t.toJSON().Resources[engine.getLogicalId(fn.node.defaultChild as never)] as CfnRes).Properties
        .ReservedConcurrentExecutions;
    expect(reserved(template, engine.api.function.function)).toBeUndefined();
    const asked = synthesized({ stage: "dev", apiConcurrency: "20", toolConcurrency: 50 });
    expect(reserved(asked.template, asked.engine.api.function.function)).toBe(20);
    expect(reserved(asked.template, asked.engine.tools.handler.function)).toBe(50);
    expect(() => synthesized({ stage: "dev", apiConcurrency: "lots" })).toThrow(
      /Invalid CDK context apiConcurrency="lots": give the concurrency to reserve/,
    );
  });

  it("send the alarms to one topic that takes only TLS, with an email subscription when asked", () => {
    template.resourceCountIs("AWS::SNS::Topic", 1);
    template.resourceCountIs("AWS::SNS::Subscription", 0);
    const policy = Object.values(template.findResources("AWS::SNS::TopicPolicy") as Record<string, CfnRes>);
    expect(JSON.stringify(policy)).toContain('"aws:SecureTransport":"false"');
    withEmail.hasResourceProperties("AWS::SNS::Subscription", {
      Protocol: "email",
      Endpoint: "ops@example.com",
    });
    expect(() => synthesized({ stage: "dev", alarmEmail: "not-an-address" })).toThrow(
      /Invalid CDK context alarmEmail="not-an-address": give an email address/,
    );
  });

  it("say where things are: the topic, the dead-letter queue, the policy bundle and what decides until then", () => {
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs[OPS_OUTPUT_KEYS.alarmTopic]?.Value).toEqual(topicRef());
    expect(outputs[OPS_OUTPUT_KEYS.deadLetterQueueUrl]?.Value).toEqual({
      "Fn::GetStackOutput": {
        StackName: storage.stackName,
        OutputName: STORAGE_OUTPUT_KEYS.deadLetterQueueUrl,
      },
    });
    expect(flat(outputs[OPS_OUTPUT_KEYS.policyBundleLocation]?.Value)).toMatch(
      new RegExp(`^s3://.*${STORAGE_OUTPUT_KEYS.policiesBucketName}.*/bundle\\.tar\\.gz$`),
    );
    expect(outputs[OPS_OUTPUT_KEYS.policyUntilPublished]?.Value).toBe(
      "the built-in default policy (policies/arbor.cedar)",
    );
    expect(outputs[OPS_OUTPUT_KEYS.metricsNamespace]?.Value).toBe("Arbor");
  });

  it("let the functions list the policies bucket, so a missing bundle reads as NoSuchKey, not 403", () => {
    const statements = Object.values(
      template.findResources("AWS::IAM::ManagedPolicy") as Record<string, CfnRes>,
    ).flatMap(
      (p) =>
        (p.Properties.PolicyDocument as { Statement: { Sid?: string; Action: unknown; Resource: unknown }[] })
          .Statement,
    );
    const listing = statements.find((s) => s.Sid === "PolicyListing");
    expect(listing?.Action).toBe("s3:ListBucket");
    expect(flat(listing?.Resource)).toContain(STORAGE_OUTPUT_KEYS.policiesBucketName);
    // EMF metrics go through the logs: no PutMetricData grant.
    expect(JSON.stringify(statements)).not.toContain("cloudwatch:PutMetricData");
  });
});
