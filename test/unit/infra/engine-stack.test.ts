import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { App, Stack } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import type { Rule } from "aws-cdk-lib/aws-events";
import { PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { AwsSolutionsChecks } from "cdk-nag";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import { beforeAll, describe, expect, it } from "vitest";
import { StepInputSchema } from "../../../functions/engine-step.ts";
import { DEFAULT_MODEL, readModel, SettingsError } from "../../../infra/app.ts";
import { DEFAULT_STEP_CONCURRENCY, MAX_RECEIVES } from "../../../infra/constructs/command-queue.ts";
import { SENDS_NO_COMMAND, STEP_GRANTS } from "../../../infra/constructs/grants.ts";
import { OPS_OUTPUT_KEYS } from "../../../infra/constructs/ops-alarms.ts";
import { toCdkEventPattern } from "../../../infra/constructs/route-rule.ts";
import { VECTOR_INDEX } from "../../../infra/constructs/vector-store.ts";
import { ENGINE_OUTPUT_KEYS } from "../../../infra/stacks/engine-stack.ts";
import { STORAGE_OUTPUT_KEYS } from "../../../infra/stacks/storage-stack.ts";
import { ALL_GSIS } from "../../../shared/adapters/aws/dynamo-schema.ts";
import { TitanEmbedder } from "../../../shared/adapters/embeddings/titan-embedder.ts";
import { DIMENSION_TAG, EMBEDDER_TAG } from "../../../shared/adapters/vectors/s3-vectors-index.ts";
import { QUEUED_STEPS, ROUTES } from "../../../shared/engine/routes.ts";
import { EVAL_ROUTE } from "../../../shared/evals/driver.ts";
import { NOTIFY_WAKE_RULE } from "../../../shared/notify/wakeups.ts";
import { AWS_EMBEDDING_DIMENSION } from "../../../shared/runtime/aws/aws-engine.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";
import { type Synthesized, synthesized } from "../../fixtures/synth.ts";
import { deployedEnvironment, lazyChunksWithoutNames, list, logicalId } from "../../support/cdk.ts";

// The same feature flags `cdk synth` gets from cdk.json, so the tests see the same templates.
const root = new URL("../../../", import.meta.url);

interface CfnRes {
  Type: string;
  Properties: Record<string, unknown>;
  DeletionPolicy?: string;
}
interface Statement {
  Sid?: string;
  Effect: string;
  Action: string | string[];
  Resource: unknown;
}

const resources = (t: Template, type: string) => t.findResources(type) as Record<string, CfnRes>;
const props = (t: Template, id: string) =>
  (t.toJSON().Resources as Record<string, CfnRes>)[id]?.Properties ?? {};
const storageOutput = (s: Synthesized, key: string) => ({
  "Fn::GetStackOutput": { StackName: s.storage.stackName, OutputName: key },
});
const flat = (value: unknown) => flattenCfnReference(value);

/** Every statement of the stack's policies (customer-managed and inline), with the policy's id. */
function statements(t: Template): (Statement & { policy: string })[] {
  return [
    ...Object.entries(resources(t, "AWS::IAM::ManagedPolicy")),
    ...Object.entries(resources(t, "AWS::IAM::Policy")),
  ].flatMap(([policy, r]) =>
    ((r.Properties.PolicyDocument as { Statement: Statement[] }).Statement ?? []).map((s) => ({
      ...s,
      policy,
    })),
  );
}

let prod: Synthesized;
let dev: Synthesized;

// Each stage's app as `cdk synth` makes it (cdk-nag included), synthesized once per test worker and
// shared with the other infra test files (test/fixtures/synth.ts): bundling every entry and CDK's
// template validation take seconds for each stage.
beforeAll(() => {
  prod = synthesized({ stage: "prod" });
  dev = synthesized({ stage: "dev" });
}, 600_000);

describe("routes", () => {
  const ruleFor = (name: string) => {
    const found = Object.values(resources(prod.template, "AWS::Events::Rule")).filter(
      (r) => r.Properties.Name === name,
    );
    expect(found).toHaveLength(1);
    return found[0] as CfnRes;
  };
  const targetOf = (name: string) =>
    (ruleFor(name).Properties.Targets as Record<string, unknown>[])[0] as Record<string, unknown>;

  const ruled = ROUTES.filter((r) => !(QUEUED_STEPS as readonly string[]).includes(r.name));

  it("has exactly one rule per route that starts on RESOURCE_PUT, on the Arbor bus, with the route's pattern unchanged", () => {
    const patterned = Object.values(resources(prod.template, "AWS::Events::Rule")).filter(
      (r) => r.Properties.EventPattern !== undefined,
    );
    // And the notify wake rule (infra-notify.test.ts), which targets a queue, not a step.
    expect(patterned.map((r) => r.Properties.Name).sort()).toEqual(
      [...ruled.map((r) => r.name), EVAL_ROUTE.name, NOTIFY_WAKE_RULE].sort(),
    );
    // The experiments' rule: its whole pattern, a top-level $or, as the driver has it.
    expect(ruleFor(EVAL_ROUTE.name).Properties.EventPattern).toEqual(EVAL_ROUTE.pattern);
    for (const route of ruled) {
      expect(ruleFor(route.name).Properties).toMatchObject({
        EventPattern: route.pattern,
        EventBusName: storageOutput(prod, STORAGE_OUTPUT_KEYS.eventBusName),
        State: "ENABLED",
      });
      expect(ruleFor(route.name).Properties.EventPattern).toEqual(route.pattern);
    }
  });

  it("targets the route's own function, whose input is the route name and the whole event", () => {
    const event = {
      version: "0",
      id: "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
      "detail-type": "TASK_READY",
      source: "arbor.engine",
      account: "111122223333",
      time: "2026-11-22T10:00:00Z",
      region: "eu-west-1",
      resources: ["cld:common.Tenant.acme"],
      detail: { taskId: "cld:common.Tenant.acme/plan.Task.t1", "arbor-event-id": "evt-1" },
    };
    for (const route of ruled) {
      const target = targetOf(route.name);
      expect(target.Arn).toEqual({
        "Fn::GetAtt": [logicalId(prod.engine.steps[route.name].function), "Arn"],
      });
      const template = (target.InputTransformer as { InputTemplate: string }).InputTemplate;
      expect(target.InputTransformer).toEqual({ InputTemplate: template });
      // What EventBridge hands the function once it substitutes its predefined variable.
      const rendered: unknown = JSON.parse(
        template.replace("<aws.events.event.json>", () => JSON.stringify(event)),
      );
      expect(StepInputSchema.parse(rendered)).toEqual({ subscription: route.name, event });
    }
  });

  it("retries deliveries and dead-letters them to the storage stack's queue", () => {
    const dlq = storageOutput(prod, STORAGE_OUTPUT_KEYS.deadLetterQueueArn);
    for (const route of ruled) {
      expect(targetOf(route.name)).toMatchObject({
        DeadLetterConfig: { Arn: dlq },
        RetryPolicy: { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 3600 },
      });
      // A step that fails: Lambda's retries, then the same queue.
      const fn = logicalId(prod.engine.steps[route.name].function);
      expect(props(prod.template, fn).DeadLetterConfig).toEqual({ TargetArn: dlq });
      prod.template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
        FunctionName: { Ref: fn },
        MaximumRetryAttempts: 2,
      });
    }
    // No statement is added to the queue's policy here: the storage stack's already admits the bus's rules.
    // (The notify queues' own policies are checked in infra-notify.test.ts.)
    const dlqUrl = JSON.stringify(prod.engine.resolve(prod.engine.storage.deadLetterQueue.queueUrl));
    for (const qp of Object.values(resources(prod.template, "AWS::SQS::QueuePolicy")))
      expect(JSON.stringify(qp.Properties.Queues)).not.toContain(dlqUrl);
  });

  it("lets only its rule invoke each step function", () => {
    // One permission per route, one for the watchdog's schedule: nothing else may invoke them.
    // (The API function's, for API Gateway, are checked in infra-api.test.ts.)
    const apiFn = { "Fn::GetAtt": [logicalId(prod.engine.api.function.function), "Arn"] };
    const engineOnes = Object.values(resources(prod.template, "AWS::Lambda::Permission")).filter(
      (p) => JSON.stringify(p.Properties.FunctionName) !== JSON.stringify(apiFn),
    );
    // And one for the notify sweep's schedule (infra-notify.test.ts), one for the experiments' rule.
    expect(engineOnes).toHaveLength(ruled.length + 3);
    prod.template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunction",
      Principal: "events.amazonaws.com",
      FunctionName: { "Fn::GetAtt": [logicalId(prod.engine.evalStep.function), "Arn"] },
      SourceArn: { "Fn::GetAtt": [logicalId(prod.engine.evalRule.rule), "Arn"] },
    });
    for (const route of ruled) {
      prod.template.hasResourceProperties("AWS::Lambda::Permission", {
        Action: "lambda:InvokeFunction",
        Principal: "events.amazonaws.com",
        FunctionName: { "Fn::GetAtt": [logicalId(prod.engine.steps[route.name].function), "Arn"] },
        SourceArn: { "Fn::GetAtt": [logicalId(prod.engine.rules[route.name]?.rule as Rule), "Arn"] },
      });
    }
  });

  it("gives each step started by a command its own queue, which it consumes one message at a time, bounded", () => {
    const dlq = storageOutput(prod, STORAGE_OUTPUT_KEYS.deadLetterQueueArn);
    const mappings = Object.values(resources(prod.template, "AWS::Lambda::EventSourceMapping"));
    for (const step of QUEUED_STEPS) {
      const queue = prod.engine.commandQueues[step].queue;
      const fn = prod.engine.steps[step].function;
      expect(props(prod.template, logicalId(queue))).toMatchObject({
        SqsManagedSseEnabled: true,
        // The step's timeout and half a minute: a running step's message is never handed out again.
        VisibilityTimeout: (fn.timeout?.toSeconds() ?? 0) + 30,
        RedrivePolicy: { deadLetterTargetArn: dlq, maxReceiveCount: MAX_RECEIVES },
      });
      const mapping = mappings.filter(
        (m) =>
          JSON.stringify(m.Properties.EventSourceArn) ===
          JSON.stringify({ "Fn::GetAtt": [logicalId(queue), "Arn"] }),
      );
      expect(mapping).toHaveLength(1);
      expect(mapping[0]?.Properties).toMatchObject({
        FunctionName: { Ref: logicalId(fn) },
        BatchSize: 1,
        FunctionResponseTypes: ["ReportBatchItemFailures"],
        ScalingConfig: { MaximumConcurrency: DEFAULT_STEP_CONCURRENCY },
      });
    }
    // Every function's environment names the queues (whoever sends a command sends it there).
    const env = props(prod.template, logicalId(prod.engine.steps.plan.function)).Environment as {
      Variables: Record<string, unknown>;
    };
    const queues = JSON.stringify(env.Variables.ARBOR_COMMAND_QUEUES);
    for (const step of QUEUED_STEPS)
      expect(queues).toContain(logicalId(prod.engine.commandQueues[step].queue));
  });

  it("takes the steps' maximum concurrency from -c stepConcurrency, and refuses what SQS would not", () => {
    const narrow = synthesized({ stage: "prod", stepConcurrency: "4" });
    for (const m of Object.values(resources(narrow.template, "AWS::Lambda::EventSourceMapping")).filter((m) =>
      JSON.stringify(m.Properties.EventSourceArn).includes("Commands"),
    ))
      expect(m.Properties.ScalingConfig).toEqual({ MaximumConcurrency: 4 });
    expect(() => synthesized({ stage: "prod", stepConcurrency: "1" })).toThrow(/stepConcurrency.*2 to 1000/);
  });

  it("bounds the leaves of one request that run at once: half the steps' concurrency, or -c leavesAtOnce up to it", () => {
    const leavesOf = (s: ReturnType<typeof synthesized>) =>
      (
        props(s.template, logicalId(s.engine.steps.ready.function)).Environment as {
          Variables: Record<string, unknown>;
        }
      ).Variables.ARBOR_LEAVES_AT_ONCE;
    expect(leavesOf(prod)).toBe(String(DEFAULT_STEP_CONCURRENCY / 2));
    expect(leavesOf(synthesized({ stage: "prod", stepConcurrency: "8" }))).toBe("4");
    expect(leavesOf(synthesized({ stage: "prod", leavesAtOnce: "0" }))).toBe("0"); // no bound
    expect(leavesOf(synthesized({ stage: "prod", leavesAtOnce: "10" }))).toBe("10");
    expect(() => synthesized({ stage: "prod", leavesAtOnce: "51" })).toThrow(
      /leavesAtOnce.*1 to the steps' concurrency \(50\)/,
    );
    expect(() => synthesized({ stage: "prod", leavesAtOnce: "many" })).toThrow(/leavesAtOnce/);
  });

  it("lets the bound give way while the leaf steps have room: up to the steps' concurrency, read from the ready and turn queues alone", () => {
    const idleOf = (s: ReturnType<typeof synthesized>) =>
      (
        props(s.template, logicalId(s.engine.steps.ready.function)).Environment as {
          Variables: Record<string, unknown>;
        }
      ).Variables.ARBOR_LEAVES_WHEN_IDLE;
    const counts = (s: ReturnType<typeof synthesized>) =>
      statements(s.template).filter((st) => list(st.Action).includes("sqs:GetQueueAttributes"));
    const arnOf = (q: { node: unknown }) => flat({ "Fn::GetAtt": [logicalId(q as never), "Arn"] });
    const { ready, turn } = prod.engine.commandQueues;
    expect(idleOf(prod)).toBe(String(DEFAULT_STEP_CONCURRENCY));
    // The ready and turn queues are read, by the policy every function that sends commands holds.
    const [read, ...more] = counts(prod).filter((st) => st.Sid === "LeafSteps");
    expect(more).toEqual([]);
    expect(list(read?.Action)).toEqual(["sqs:GetQueueAttributes"]);
    expect(list(read?.Resource).map(flat)).toEqual([arnOf(ready.queue), arnOf(turn.queue)]);
    expect(read?.policy).toBe(logicalId(prod.engine.commandsPolicy));
    // The API function (a request canceled there frees its slots) may read the ready queue's too.
    const apiReadsOf = (x: ReturnType<typeof synthesized>) => {
      const apiRole = flat({ Ref: logicalId(x.engine.api.function.role) });
      const apiPolicies = Object.entries(resources(x.template, "AWS::IAM::Policy"))
        .filter(([, p]) => (p.Properties.Roles as unknown[]).some((r) => flat(r) === apiRole))
        .map(([id]) => id);
      return counts(x)
        .filter((st) => apiPolicies.includes(st.policy))
        .flatMap((st) => list(st.Resource).map(flat));
    };
    expect(apiReadsOf(prod)).toContainEqual(arnOf(ready.queue));
    expect(idleOf(synthesized({ stage: "prod", stepConcurrency: "8" }))).toBe("8");
    expect(idleOf(synthesized({ stage: "prod", leavesWhenIdle: "30" }))).toBe("30");
    const never = synthesized({ stage: "prod", leavesWhenIdle: "0" });
    expect(idleOf(never)).toBe("0");
    // Nothing counts the leaf steps, nothing may (sending to a queue grants reading its attributes).
    expect(counts(never).filter((st) => st.Sid === "LeafSteps")).toEqual([]);
    expect(apiReadsOf(never)).not.toContainEqual(arnOf(never.engine.commandQueues.ready.queue));
    expect(idleOf(synthesized({ stage: "prod", leavesAtOnce: "0" }))).toBe("0"); // no bound to give way
    expect(() => synthesized({ stage: "prod", leavesWhenIdle: "51" })).toThrow(
      /leavesWhenIdle.*from leavesAtOnce \(25\) to the steps' concurrency \(50\)/,
    );
    expect(() => synthesized({ stage: "prod", leavesWhenIdle: "10" })).toThrow(/leavesWhenIdle/);
  });

  it("keeps patterns CDK cannot express as they are, or refuses them", () => {
    const pattern = {
      source: ["arbor"],
      detail: { urn: [{ prefix: "cld:" }], name: [{ "anything-but": "x" }] },
    };
    expect(toCdkEventPattern(pattern)).toEqual({ source: ["arbor"], detail: pattern.detail });
    expect(() => toCdkEventPattern({ $or: [{ source: ["a"] }] })).toThrow(/\$or/);
  });
});

describe("functions", () => {
  const stepFunctions = () => ROUTES.map((r) => [r, logicalId(prod.engine.steps[r.name].function)] as const);
  const watchdogFn = () => logicalId(prod.engine.watchdog.function);
  const toolFn = () => logicalId(prod.engine.tools.handler.function);

  it("run Node.js 24 on ARM64, with the long timeout only where the model is called or tools run", () => {
    for (const [route, id] of stepFunctions()) {
      expect(props(prod.template, id)).toMatchObject({
        Runtime: "nodejs24.x",
        Architectures: ["arm64"],
        Handler: "index.handler",
        // A step that runs tools waits on the tool function (activity: no model, yet 5 minutes); a
        // document's processing reads a PDF on a thread of its own and embeds hundreds of chunks.
        Timeout: route.callsModel || route.runsTools || route.name === "documents" ? 300 : 60,
        MemorySize: route.callsModel || route.name === "documents" ? 1024 : 512,
      });
    }
    expect(props(prod.template, watchdogFn())).toMatchObject({ Runtime: "nodejs24.x", Timeout: 300 });
    expect(props(prod.template, toolFn())).toMatchObject({ Runtime: "nodejs24.x", Architectures: ["arm64"] });
  });

  it("share one bundle for the steps and one for the watchdog", () => {
    const keys = stepFunctions().map(([, id]) => (props(prod.template, id).Code as { S3Key: string }).S3Key);
    expect(new Set(keys).size).toBe(1);
    expect((props(prod.template, watchdogFn()).Code as { S3Key: string }).S3Key).not.toBe(keys[0]);
  });

  it("get every setting config.ts needs in AWS mode, from the storage stack's outputs", () => {
    for (const id of [...stepFunctions().map(([, id]) => id), watchdogFn()]) {
      const vars = (props(prod.template, id).Environment as { Variables: Record<string, unknown> }).Variables;
      expect(vars).toMatchObject({
        ARBOR_MODE: "aws",
        ARBOR_RESOURCES_BUCKET: storageOutput(prod, STORAGE_OUTPUT_KEYS.resourcesBucketName),
        ARBOR_TABLE_NAME: storageOutput(prod, STORAGE_OUTPUT_KEYS.tableName),
        ARBOR_EVENT_BUS_NAME: storageOutput(prod, STORAGE_OUTPUT_KEYS.eventBusName),
        ARBOR_VECTOR_BUCKET: prod.engine.resolve(prod.engine.vectors.bucketName),
        ARBOR_VECTOR_INDEX: prod.engine.vectors.indexName,
        ARBOR_MODEL_PROVIDER: "bedrock",
        ARBOR_MODEL: DEFAULT_MODEL,
      });
      // Lambda sets AWS_REGION itself; CloudFormation fills in the references (the ready and turn
      // steps' ARBOR_PUBLIC_URL: the API's endpoint).
      const env = deployedEnvironment(vars, {
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.eu-west-1.amazonaws.com",
      });
      const config = loadConfig({ ...env, AWS_REGION: "eu-west-1" });
      expect(config).toMatchObject({
        mode: "aws",
        vectors: { bucket: "value-from-cloudformation", index: "resources-titan-v2-1024" },
        model: { provider: "bedrock", model: DEFAULT_MODEL, region: "eu-west-1" },
      });
    }
    const watchdogVars = (
      props(prod.template, watchdogFn()).Environment as { Variables: Record<string, unknown> }
    ).Variables;
    expect(watchdogVars.ARBOR_WATCHDOG_STALE_MS).toBe("600000");
  });

  it("write to their own log group, kept a month, retained outside dev", () => {
    const groups = resources(prod.template, "AWS::Logs::LogGroup");
    // The API's groups (its function's and the access logs) are checked in infra-api.test.ts.
    const api = [
      prod.engine.api.function.logGroup,
      prod.engine.api.gateway.accessLogs,
      prod.engine.notify.handler.logGroup,
    ].map(logicalId);
    const engineGroups = Object.keys(groups).filter((g) => !api.includes(g));
    expect(engineGroups).toHaveLength(ROUTES.length + 3);
    for (const g of Object.values(groups))
      expect(g).toMatchObject({ DeletionPolicy: "Retain", Properties: { RetentionInDays: 30 } });
    for (const g of Object.values(resources(dev.template, "AWS::Logs::LogGroup")))
      expect(g.DeletionPolicy).toBe("Delete");
    const used = [
      ...stepFunctions().map(([, id]) => id),
      logicalId(prod.engine.evalStep.function),
      watchdogFn(),
      toolFn(),
    ].map((id) => (props(prod.template, id).LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref);
    expect(used.sort()).toEqual(engineGroups.sort());
  });

  it("the bundle loads on its own and answers bad input with the message from the handler", () => {
    const key = (props(prod.template, stepFunctions()[0]?.[1] ?? "").Code as { S3Key: string }).S3Key;
    const bundle = pathToFileURL(
      join(prod.app.outdir, `asset.${key.replace(/\.zip$/, "")}`, "index.mjs"),
    ).href;
    const script = `
      const { handler } = await import(${JSON.stringify(bundle)});
      for (const input of [{ subscription: "plan" }, { subscription: "plan", event: { id: "e", source: "arbor.engine", "detail-type": "PLAN_REQUESTED", detail: {} } }]) {
        try { await handler(input); process.stdout.write("no error\\n"); } catch (e) { process.stdout.write(e.name + ": " + e.message + "\\n"); }
      }`;
    const lines = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      env: { PATH: process.env.PATH, POWERTOOLS_LOG_LEVEL: "SILENT" },
      encoding: "utf8",
    }).split("\n");
    // The failed step is counted: an EMF line of the Arbor namespace (ops-alarms.ts), apart from the errors.
    const emf = lines.filter((l) => l.startsWith('{"_aws"'));
    expect(emf.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ StepFailed: 1, route: "plan", stage: "unknown", service: "arbor" }),
    ]);
    const out = lines.filter((l) => !l.startsWith('{"_aws"'));
    expect(out[0]).toMatch(/^ValidationError: Invalid engine step input.*event/);
    // No environment: the handler says what to set before touching AWS.
    expect(out[1]).toMatch(/^ConfigError: .*ARBOR_MODE=aws/);
  });
});

describe("permissions", () => {
  const bySid = (t: Template, sid: string, policy = "ApiData") => {
    // The API function's data policy's (the steps' and the tool function's own are checked below).
    const found = statements(t).filter((s) => s.Sid === sid && s.policy.startsWith(policy));
    expect(found).toHaveLength(1);
    const [s] = found as Statement[];
    return { actions: list(s?.Action ?? []).sort(), resources: list(s?.Resource).map(flat) };
  };

  it("grant no wildcard action, and no wildcard resource but the resource objects", () => {
    const all = statements(prod.template);
    expect(all.length).toBeGreaterThan(0);
    for (const s of all) {
      expect(s.Effect).toBe("Allow");
      for (const a of list(s.Action)) expect(a).not.toContain("*");
      for (const r of list(s.Resource).map(flat)) {
        expect(r).not.toBe("*");
        // The objects of the resources bucket; and the default model's inference profile sends each
        // request to its one model in any region of the profile: a region wildcard, for that model only.
        if (r.includes("*") && s.Sid === "Model")
          expect(r).toBe(
            `arn:<AWS::Partition>:bedrock:*::foundation-model/${DEFAULT_MODEL.replace(/^us\./, "")}`,
          );
        else if (r.includes("*"))
          expect([s.Sid, r]).toEqual([
            expect.stringMatching(
              /^(Resources|NotifyAnswers|ResourceReads|ToolResults|ToolResources|RequestTreeWrites|ConversationWrites|TenantWrites|DocumentObjects|DocumentDeletes|ToolArtifacts)$/,
            ),
            expect.stringMatching(
              /:s3:::[^/]*\/(\*|cld:\*\/plan\.Task\.\*\/common\.Message\.\*|cld:common\.Tenant\.\*\/common\.Tool\.\*|cld:common\.Tenant\.\*\/doc\.Document\.\*|cld:\*\/plan\.Task\.\*\/common\.Artifact\.\*|cld:common\.Tenant\.\*(\/common\.Conversation\.\*(\/common\.Message\.\*\/\*)?)?)$/,
            ),
          ]);
      }
    }
  });

  it("scope data access to the storage stack's bucket, table (and its indexes by name) and bus", () => {
    const bucket = `arn:<AWS::Partition>:s3:::${flat(storageOutput(prod, STORAGE_OUTPUT_KEYS.resourcesBucketName))}`;
    const table = `arn:<AWS::Partition>:dynamodb:<AWS::Region>:<AWS::AccountId>:table/${flat(storageOutput(prod, STORAGE_OUTPUT_KEYS.tableName))}`;
    expect(bySid(prod.template, "ResourceReads")).toEqual({
      actions: ["s3:GetObject"],
      resources: [`${bucket}/*`],
    });
    expect(bySid(prod.template, "TenantWrites")).toEqual({
      actions: ["s3:PutObject"],
      resources: [`${bucket}/cld:common.Tenant.*`],
    });
    expect(bySid(prod.template, "ResourceListing")).toEqual({
      actions: ["s3:ListBucket"],
      resources: [bucket],
    });
    expect(bySid(prod.template, "StateReads").resources.sort()).toEqual(
      [table, ...ALL_GSIS.map((g) => `${table}/index/${g.name}`)].sort(),
    );
    expect(bySid(prod.template, "Events")).toEqual({
      actions: ["events:PutEvents"],
      resources: [flat(storageOutput(prod, STORAGE_OUTPUT_KEYS.eventBusArn))],
    });
  });

  it("scope Bedrock to the configured model and Titan, and S3 Vectors to the one index", () => {
    const model = (id: string) => `arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/${id}`;
    // The default model is an inference profile: the profile, and its one model in the profile's regions.
    expect(bySid(prod.template, "Model", "ModelAccess")).toEqual({
      actions: ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"],
      resources: [
        `arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/${DEFAULT_MODEL}`,
        `arn:<AWS::Partition>:bedrock:*::foundation-model/${DEFAULT_MODEL.replace(/^us\./, "")}`,
      ],
    });
    expect(bySid(prod.template, "Embeddings")).toEqual({
      actions: ["bedrock:InvokeModel"],
      resources: [model("amazon.titan-embed-text-v2:0")],
    });
    for (const sid of ["VectorIndexOpen", "TeamIndex"])
      expect(bySid(prod.template, sid).resources).toEqual([
        flat(prod.engine.resolve(prod.engine.vectors.indexArn)),
      ]);
  });

  it("give each step its route's grants as its own data policy, and no step the API's", () => {
    for (const route of ROUTES) {
      const policy = logicalId(prod.engine.stepDataPolicies[route.name]);
      const sids = statements(prod.template)
        .filter((s) => s.policy === policy)
        .map((s) => s.Sid);
      expect([route.name, sids]).toEqual([route.name, STEP_GRANTS[route.name].map((g) => g.sid)]);
    }
    // No step deletes, but the documents step a re-added document's older chunks (under it only).
    const writes = statements(prod.template).filter(
      (s) =>
        s.policy.includes("StepData") &&
        list(s.Action).some((a) => a.includes("Delete")) &&
        !(
          s.policy.includes("DocumentsStepData") && ["DocumentObjects", "ChunkVectors"].includes(s.Sid ?? "")
        ),
    );
    expect(writes).toEqual([]);
  });

  it("give model access only to the steps that call the model, and the watchdog; the tool function only to ready and turn", () => {
    const modelPolicy = { Ref: logicalId(prod.engine.modelPolicy) };
    const dataPolicy = { Ref: logicalId(prod.engine.watchdogDataPolicy) };
    const invokeTools = { Ref: logicalId(prod.engine.tools.invokePolicy) };
    const commands = { Ref: logicalId(prod.engine.commandsPolicy) };
    for (const route of ROUTES) {
      const role = logicalId(prod.engine.steps[route.name].role);
      expect(props(prod.template, role).ManagedPolicyArns).toEqual([
        { Ref: logicalId(prod.engine.stepDataPolicies[route.name]) },
        ...(SENDS_NO_COMMAND.has(route.name) ? [] : [commands]),
        ...(route.callsModel ? [modelPolicy] : []),
        ...(route.runsTools ? [invokeTools] : []),
      ]);
    }
    expect(props(prod.template, logicalId(prod.engine.watchdog.role)).ManagedPolicyArns).toEqual([
      dataPolicy,
      commands,
      modelPolicy,
    ]);
    // The tool function calls no model, and has its own narrower data policy.
    expect(props(prod.template, logicalId(prod.engine.tools.handler.role)).ManagedPolicyArns).toEqual([
      { Ref: logicalId(prod.engine.toolDataPolicy) },
    ]);
  });

  it("without a tool registry (-c tools), ship none and grant no invocation but the tool function's", () => {
    expect(prod.engine.toolPolicy).toBeUndefined();
    for (const fn of [
      ...ROUTES.map((r) => prod.engine.steps[r.name]),
      prod.engine.watchdog,
      prod.engine.tools.handler,
    ]) {
      const { Environment, Code } = props(prod.template, logicalId(fn.function)) as {
        Environment: { Variables: Record<string, unknown> };
        Code: { S3Key: string };
      };
      expect(Environment.Variables).not.toHaveProperty("ARBOR_TOOLS_FILE");
      const bundle = join(prod.app.outdir, `asset.${Code.S3Key.replace(/\.zip$/, "")}`);
      // The handler, the chunks it loads when a call needs them (function-bundle.ts), and nothing more.
      const files = readdirSync(bundle).sort();
      // The steps' bundle also reads documents: the PDF reader's script (function-bundle.ts).
      const isStep = ROUTES.some((r) => prod.engine.steps[r.name] === fn);
      expect(files.filter((f) => !/^chunk-[A-Z0-9]+\.mjs(\.map)?$/.test(f))).toEqual([
        "cedar_wasm_bg.wasm",
        "index.mjs",
        "index.mjs.map",
        "node_modules",
        ...(isStep ? ["pdf-text-worker.mjs"] : []),
      ]);
      expect(files.filter((f) => f.endsWith(".mjs")).length).toBeGreaterThan(10);
      expect(lazyChunksWithoutNames(bundle)).toEqual([]);
    }
    const invokes = statements(prod.template).filter((s) =>
      list(s.Action).some((a) => a.startsWith("lambda:")),
    );
    expect(invokes.map((s) => [s.Sid, s.Action, s.Resource])).toEqual([
      [
        "ToolService",
        "lambda:InvokeFunction",
        { "Fn::GetAtt": [logicalId(prod.engine.tools.handler.function), "Arn"] },
      ],
    ]);
  });

  /**
   * Every SDK command the AWS adapters can send while the engine runs, and the IAM actions that
   * authorize it. A command missing here fails the test: add its action to the engine stack first.
   */
  const AUTHORIZED_BY: Record<string, readonly string[] | { notAtRunTime: string }> = {
    GetItemCommand: ["dynamodb:GetItem"],
    BatchGetItemCommand: ["dynamodb:BatchGetItem"],
    QueryCommand: ["dynamodb:Query"],
    TransactWriteItemsCommand: [
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "dynamodb:DeleteItem",
      "dynamodb:ConditionCheckItem",
    ],
    CreateTableCommand: {
      notAtRunTime: "DynamoStateStore.ensureTable, for local peers; the stack creates the table",
    },
    DescribeTableCommand: { notAtRunTime: "DynamoStateStore.ensureTable" },
    GetObjectCommand: ["s3:GetObject"],
    PutObjectCommand: ["s3:PutObject"],
    DeleteObjectCommand: ["s3:DeleteObject"],
    ListObjectsV2Command: ["s3:ListBucket"],
    PutEventsCommand: ["events:PutEvents"],
    GetIndexCommand: ["s3vectors:GetIndex"],
    ListTagsForResourceCommand: ["s3vectors:ListTagsForResource"],
    PutVectorsCommand: ["s3vectors:PutVectors"],
    QueryVectorsCommand: ["s3vectors:QueryVectors", "s3vectors:GetVectors"],
    CreateIndexCommand: { notAtRunTime: "only with createIfMissing, which createAwsEngine never sets" },
    DeleteVectorsCommand: { notAtRunTime: "VectorIndex.delete, which no engine step calls" },
    InvokeModelCommand: ["bedrock:InvokeModel"],
    ConverseCommand: ["bedrock:InvokeModel"],
    ConverseStreamCommand: ["bedrock:InvokeModelWithResponseStream"],
    InvokeCommand: ["lambda:InvokeFunction"],
    SendMessageBatchCommand: ["sqs:SendMessage"],
    GetQueueAttributesCommand: ["sqs:GetQueueAttributes"],
  };
  const ADAPTERS = [
    "shared/adapters/aws/dynamo-state-store.ts",
    "shared/adapters/aws/s3-object-store.ts",
    "shared/adapters/aws/eventbridge-event-bus.ts",
    "shared/adapters/vectors/s3-vectors-index.ts",
    "shared/adapters/embeddings/titan-embedder.ts",
    "shared/adapters/llm/bedrock-llm.ts",
    "shared/adapters/aws/tool-function-invoke.ts",
    "shared/adapters/aws/sqs-delivery-queue.ts",
    "shared/adapters/aws/sqs-command-queues.ts",
  ];

  it("allow every call the AWS adapters make at run time", () => {
    const granted = new Set(statements(prod.template).flatMap((s) => list(s.Action)));
    const commands = new Set(
      ADAPTERS.flatMap((file) => [
        ...readFileSync(new URL(file, root), "utf8").matchAll(/\b([A-Z][A-Za-z0-9]*Command)\b/g),
      ]).map((m) => m[1] as string),
    );
    expect(commands.size).toBeGreaterThan(10);
    const unknown = [...commands].filter((c) => !(c in AUTHORIZED_BY));
    expect(unknown, "commands without an IAM action in this table (and maybe the stack)").toEqual([]);
    for (const command of commands) {
      const needs = AUTHORIZED_BY[command];
      if (Array.isArray(needs))
        for (const action of needs) expect([command, granted.has(action)]).toEqual([command, true]);
    }
  });
});

describe("vector store", () => {
  it("creates the bucket and the index the engine's embedder and the adapter expect", () => {
    const embedder = new TitanEmbedder({
      client: new BedrockRuntimeClient({ region: "us-east-1" }),
      dimension: AWS_EMBEDDING_DIMENSION as 1024,
    });
    expect(VECTOR_INDEX.tags).toEqual({
      [EMBEDDER_TAG]: embedder.id,
      [DIMENSION_TAG]: String(embedder.dimension),
    });
    const [index] = Object.values(resources(prod.template, "AWS::S3Vectors::Index"));
    expect(index?.Properties).toMatchObject({
      DataType: "float32",
      Dimension: embedder.dimension,
      DistanceMetric: "cosine",
      IndexName: prod.engine.vectors.indexName,
      MetadataConfiguration: { NonFilterableMetadataKeys: ["arbor_meta"] },
      Tags: expect.arrayContaining(Object.entries(VECTOR_INDEX.tags).map(([Key, Value]) => ({ Key, Value }))),
    });
    prod.template.resourceCountIs("AWS::S3Vectors::VectorBucket", 1);
    prod.template.hasResourceProperties("AWS::S3Vectors::VectorBucket", {
      VectorBucketName: { "Fn::Join": ["", ["arbor-prod-vectors-", { Ref: "AWS::AccountId" }]] },
    });
  });

  it("keeps the embeddings outside dev and deletes them with a dev stack", () => {
    for (const type of ["AWS::S3Vectors::VectorBucket", "AWS::S3Vectors::Index"]) {
      expect(Object.values(resources(prod.template, type)).map((r) => r.DeletionPolicy)).toEqual(["Retain"]);
      expect(Object.values(resources(dev.template, type)).map((r) => r.DeletionPolicy)).toEqual(["Delete"]);
    }
  });
});

describe("watchdog", () => {
  it("runs every five minutes, without retries (the next run does the same work)", () => {
    prod.template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(5 minutes)",
      Targets: [
        Match.objectLike({
          Arn: { "Fn::GetAtt": [logicalId(prod.engine.watchdog.function), "Arn"] },
          RetryPolicy: { MaximumRetryAttempts: 0 },
        }),
      ],
    });
    prod.template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
      FunctionName: { Ref: logicalId(prod.engine.watchdog.function) },
      MaximumRetryAttempts: 0,
    });
  });
});

describe("stacks", () => {
  it("publishes the function and vector store names under stable output keys", () => {
    const outputs = prod.template.findOutputs("*");
    expect(Object.keys(outputs).sort()).toEqual(
      [...Object.values(ENGINE_OUTPUT_KEYS), ...Object.values(OPS_OUTPUT_KEYS)].sort(),
    );
    for (const route of ROUTES) {
      expect(outputs[ENGINE_OUTPUT_KEYS[route.name]]?.Value).toEqual({
        Ref: logicalId(prod.engine.steps[route.name].function),
      });
    }
    expect(outputs[ENGINE_OUTPUT_KEYS.vectorIndexName]?.Value).toBe("resources-titan-v2-1024");
  });

  it("reads the storage stack by its published outputs, adding none to it, and deploys after it", () => {
    expect(prod.engine.stackName).toBe("arbor-prod-engine");
    expect(prod.engine.dependencies).toContain(prod.storage);
    const storageOutputs = Template.fromStack(prod.storage).findOutputs("*");
    expect(Object.keys(storageOutputs).sort()).toEqual(Object.values(STORAGE_OUTPUT_KEYS).sort());
  });
});

describe("cdk-nag AwsSolutions", () => {
  it("reports nothing unacknowledged on the whole app, in any stage", () => {
    for (const { app } of [prod, dev]) {
      expect(new AwsSolutionsChecks(undefined, { verbose: true }).validateScope(app).violations).toEqual([]);
      const written = JSON.parse(readFileSync(join(app.outdir, "validation-report.json"), "utf8")) as {
        pluginReports: unknown[];
      };
      expect(written.pluginReports).toEqual([]);
    }
    const annotations = Annotations.fromStack(prod.engine);
    expect(annotations.findError("*", Match.anyValue())).toEqual([]);
    expect(annotations.findWarning("*", Match.anyValue())).toEqual([]);
  });

  it("still passes with an inference profile, whose grant spans the profile's regions for that model only", () => {
    const profile = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0";
    const withProfile = synthesized({ stage: "dev-profile", model: profile });
    expect(new AwsSolutionsChecks().validateScope(withProfile.app).violations).toEqual([]);
    const [model] = statements(withProfile.template).filter((s) => s.Sid === "Model");
    expect(list(model?.Resource).map(flat)).toEqual([
      `arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:inference-profile/${profile}`,
      "arn:<AWS::Partition>:bedrock:*::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0",
    ]);
  }, 180_000);

  it("does find an unscoped grant (the check is not vacuous)", () => {
    const stack = new Stack(new App(), "Loose");
    const role = new Role(stack, "Role", { assumedBy: new ServicePrincipal("lambda.amazonaws.com") });
    role.addToPolicy(new PolicyStatement({ actions: ["s3:*"], resources: ["*"] }));
    const rules = new AwsSolutionsChecks().validateScope(stack).violations.map((v) => v.ruleName);
    expect(rules).toEqual(
      expect.arrayContaining(["AwsSolutions-IAM5[Action::s3:*]", "AwsSolutions-IAM5[Resource::*]"]),
    );
  });
});

describe("model settings", () => {
  const read = (context: Record<string, unknown>) => readModel(new App({ context }));

  it("defaults to Claude Haiku 4.5 on Bedrock, through the US inference profile", () => {
    expect(DEFAULT_MODEL).toBe("us.anthropic.claude-haiku-4-5-20251001-v1:0");
    expect(read({})).toEqual({ provider: "bedrock", id: DEFAULT_MODEL });
    expect(read({ model: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0" })).toEqual({
      provider: "bedrock",
      id: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
    });
  });

  it("refuses a model past its end of life, naming the one to use", () => {
    for (const model of [
      "anthropic.claude-3-5-haiku-20241022-v1:0",
      "us.anthropic.claude-3-5-haiku-20241022-v1:0",
    ])
      expect(() => read({ model })).toThrow(
        /end of life.*Use us\.anthropic\.claude-haiku-4-5-20251001-v1:0 instead.*at model$/s,
      );
  });

  it("rejects what it cannot deploy, naming the key", () => {
    expect(() => read({ modelProvider: "openai" })).toThrow(SettingsError);
    expect(() => read({ modelProvider: "openai" })).toThrow(/Bedrock models only.*at modelProvider/s);
    expect(() => read({ model: "claude 3; rm -rf" })).toThrow(/Bedrock model id.*at model$/s);
  });
});
