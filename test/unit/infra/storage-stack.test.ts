import { readFileSync } from "node:fs";
import { join } from "node:path";
import { App, Stack, Token } from "aws-cdk-lib";
import { Annotations, Match, type Template } from "aws-cdk-lib/assertions";
import { Bucket } from "aws-cdk-lib/aws-s3";
import { Queue } from "aws-cdk-lib/aws-sqs";
import { AwsSolutionsChecks } from "cdk-nag";
import { beforeAll, describe, expect, it } from "vitest";
import { createApp, readSettings, SettingsError } from "../../../infra/app.ts";
import { STORAGE_OUTPUT_KEYS, type StorageStack } from "../../../infra/stacks/storage-stack.ts";
import { ALL_GSIS, TABLE_KEYS, TTL_ATTRIBUTE } from "../../../shared/adapters/aws/dynamo-schema.ts";
import { synthesized } from "../../fixtures/synth.ts";
import { logicalId } from "../../support/cdk.ts";

interface Synthesized {
  app: App;
  storage: StorageStack;
  template: Template;
}

/**
 * The app exactly as infra/app.ts builds it, for one stage: synthesized once per test worker and
 * shared with the other infra test files (test/fixtures/synth.ts). Synthesis runs the validation
 * plugins (cdk-nag included) and throws on any finding.
 */
function synth(stage: string): Synthesized {
  const { app, storage, storageTemplate } = synthesized({ stage });
  return { app, storage, template: storageTemplate };
}

let prod: Synthesized;
let dev: Synthesized;

// One synthesis per stage (and test worker). The first one loads CDK's CloudFormation schema
// validation (the same checks `cdk synth` runs), a few seconds on a cold start; each bundles the
// engine stack's three entries (steps, watchdog, tool function), a minute or more on a busy machine.
beforeAll(() => {
  prod = synth("prod");
  dev = synth("dev");
}, 600_000);

describe("buckets", () => {
  const dataBuckets = () => [prod.storage.resourcesBucket, prod.storage.policiesBucket];
  const allBuckets = () => [...dataBuckets(), prod.storage.accessLogsBucket];

  it("creates exactly the resources, policies and access log buckets", () => {
    prod.template.resourceCountIs("AWS::S3::Bucket", 3);
  });

  it("encrypts, blocks every public path and disables ACLs on every bucket", () => {
    const buckets = prod.template.findResources("AWS::S3::Bucket");
    for (const b of allBuckets()) {
      expect(buckets[logicalId(b)]?.Properties).toMatchObject({
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } }],
        },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        OwnershipControls: { Rules: [{ ObjectOwnership: "BucketOwnerEnforced" }] },
      });
    }
  });

  it("denies plain HTTP and TLS below 1.2 in every bucket policy", () => {
    for (const b of allBuckets()) {
      prod.template.hasResourceProperties("AWS::S3::BucketPolicy", {
        Bucket: { Ref: logicalId(b) },
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: "Deny",
              Action: "s3:*",
              Principal: { AWS: "*" },
              Condition: { Bool: { "aws:SecureTransport": "false" } },
            }),
            Match.objectLike({
              Effect: "Deny",
              Action: "s3:*",
              Condition: { NumericLessThan: { "s3:TlsVersion": 1.2 } },
            }),
          ]),
        },
      });
    }
  });

  it("versions the data buckets, expires noncurrent versions and logs access to the log bucket", () => {
    const buckets = prod.template.findResources("AWS::S3::Bucket");
    for (const [b, prefix] of [
      [prod.storage.resourcesBucket, "resources/"],
      [prod.storage.policiesBucket, "policies/"],
    ] as const) {
      expect(buckets[logicalId(b)]?.Properties).toMatchObject({
        VersioningConfiguration: { Status: "Enabled" },
        LoggingConfiguration: {
          DestinationBucketName: { Ref: logicalId(prod.storage.accessLogsBucket) },
          LogFilePrefix: prefix,
        },
        LifecycleConfiguration: {
          Rules: [
            expect.objectContaining({
              Status: "Enabled",
              NoncurrentVersionExpiration: { NoncurrentDays: 90 },
            }),
          ],
        },
      });
    }
  });

  it("keeps data outside dev and empties then deletes the buckets in dev", () => {
    for (const [b, policy] of Object.entries(prod.template.findResources("AWS::S3::Bucket"))) {
      expect([b, policy.DeletionPolicy]).toEqual([b, "Retain"]);
    }
    prod.template.resourceCountIs("Custom::S3AutoDeleteObjects", 0);
    for (const [b, policy] of Object.entries(dev.template.findResources("AWS::S3::Bucket"))) {
      expect([b, policy.DeletionPolicy]).toEqual([b, "Delete"]);
    }
    dev.template.resourceCountIs("Custom::S3AutoDeleteObjects", 3);
  });
});

describe("state table", () => {
  const table = (t: Template) => {
    const tables = Object.values(t.findResources("AWS::DynamoDB::Table"));
    expect(tables).toHaveLength(1);
    return tables[0] as { Properties: Record<string, unknown>; DeletionPolicy?: string };
  };

  it("has the key schema of dynamo-schema.ts, every key a string", () => {
    const { Properties } = table(prod.template);
    expect(Properties.KeySchema).toEqual([
      { AttributeName: TABLE_KEYS.partitionKey, KeyType: "HASH" },
      { AttributeName: TABLE_KEYS.sortKey, KeyType: "RANGE" },
    ]);
    const keys = [
      TABLE_KEYS.partitionKey,
      TABLE_KEYS.sortKey,
      ...ALL_GSIS.flatMap((g) => [g.partitionKey, g.sortKey]),
    ];
    expect(Properties.AttributeDefinitions).toEqual(
      expect.arrayContaining(keys.map((AttributeName) => ({ AttributeName, AttributeType: "S" }))),
    );
    expect(Properties.AttributeDefinitions).toHaveLength(new Set(keys).size);
  });

  it("has exactly the GSIs of dynamo-schema.ts, with their projections", () => {
    expect(table(prod.template).Properties.GlobalSecondaryIndexes).toEqual(
      ALL_GSIS.map((g) => ({
        IndexName: g.name,
        KeySchema: [
          { AttributeName: g.partitionKey, KeyType: "HASH" },
          { AttributeName: g.sortKey, KeyType: "RANGE" },
        ],
        Projection:
          g.projection === "ALL"
            ? { ProjectionType: "ALL" }
            : { ProjectionType: "INCLUDE", NonKeyAttributes: [...g.projection] },
      })),
    );
  });

  it("is on-demand, with point-in-time recovery and the TTL attribute", () => {
    expect(table(prod.template).Properties).toMatchObject({
      BillingMode: "PAY_PER_REQUEST",
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      TimeToLiveSpecification: { AttributeName: TTL_ATTRIBUTE, Enabled: true },
    });
    expect(TTL_ATTRIBUTE).toBe("expiresAt");
  });

  it("is deletion-protected and retained outside dev only", () => {
    expect(table(prod.template)).toMatchObject({
      DeletionPolicy: "Retain",
      Properties: { DeletionProtectionEnabled: true },
    });
    expect(table(dev.template)).toMatchObject({
      DeletionPolicy: "Delete",
      Properties: { DeletionProtectionEnabled: false },
    });
  });
});

describe("event bus", () => {
  it("is a custom bus named arbor-<stage>", () => {
    prod.template.hasResourceProperties("AWS::Events::EventBus", { Name: "arbor-prod" });
    dev.template.hasResourceProperties("AWS::Events::EventBus", { Name: "arbor-dev" });
  });

  it("archives every event on the bus", () => {
    prod.template.resourceCountIs("AWS::Events::Archive", 1);
    prod.template.hasResourceProperties("AWS::Events::Archive", {
      SourceArn: { "Fn::GetAtt": [logicalId(prod.storage.eventBus), "Arn"] },
      EventPattern: { account: [{ Ref: "AWS::AccountId" }] },
      RetentionDays: 90,
    });
  });

  it("has an encrypted dead-letter queue that only accepts TLS and this bus's rules", () => {
    prod.template.resourceCountIs("AWS::SQS::Queue", 1);
    prod.template.hasResourceProperties("AWS::SQS::Queue", {
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 24 * 3600,
    });
    const queue = logicalId(prod.storage.deadLetterQueue);
    prod.template.hasResourceProperties("AWS::SQS::QueuePolicy", {
      Queues: [{ Ref: queue }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Effect: "Deny",
            Condition: { Bool: { "aws:SecureTransport": "false" } },
          }),
          Match.objectLike({
            Effect: "Allow",
            Principal: { Service: "events.amazonaws.com" },
            Action: "sqs:SendMessage",
            Condition: Match.objectLike({
              ArnLike: { "aws:SourceArn": Match.objectLike({ "Fn::Join": Match.anyValue() }) },
            }),
          }),
        ]),
      },
    });
  });
});

describe("outputs", () => {
  it("publishes every name under its stable output key, the same values as `outputs`", () => {
    const outputs = prod.template.findOutputs("*");
    expect(Object.keys(outputs).sort()).toEqual(Object.values(STORAGE_OUTPUT_KEYS).sort());
    for (const [name, key] of Object.entries(STORAGE_OUTPUT_KEYS)) {
      const value = prod.storage.outputs[name as keyof typeof STORAGE_OUTPUT_KEYS];
      expect(outputs[key]?.Value).toEqual(prod.storage.resolve(value));
    }
    expect(outputs[STORAGE_OUTPUT_KEYS.tableName]?.Value).toEqual({ Ref: logicalId(prod.storage.table) });
    expect(outputs[STORAGE_OUTPUT_KEYS.eventBusName]?.Value).toEqual({
      Ref: logicalId(prod.storage.eventBus),
    });
  });
});

describe("cdk-nag AwsSolutions", () => {
  it("reports nothing unacknowledged, in any stage", () => {
    for (const { app } of [prod, dev]) {
      const report = new AwsSolutionsChecks(undefined, { verbose: true }).validateScope(app);
      expect(report.violations).toEqual([]);
      // What `cdk synth` prints comes from this file: no plugin may have reported anything.
      const written = JSON.parse(readFileSync(join(app.outdir, "validation-report.json"), "utf8")) as {
        pluginReports: unknown[];
      };
      expect(written.pluginReports).toEqual([]);
    }
  });

  it("leaves no error or AwsSolutions annotation on the stack", () => {
    // Annotations.fromStack synthesizes again: once per stage is enough.
    for (const { storage } of [prod, dev]) {
      const annotations = Annotations.fromStack(storage);
      // cdk-nag 3 no longer annotates (the checks above are the real ones); CDK's own errors would show here.
      expect(annotations.findError("*", Match.anyValue())).toEqual([]);
      expect(annotations.findWarning("*", Match.stringLikeRegexp("AwsSolutions-.*"))).toEqual([]);
    }
  });

  it("does find the problems of an unhardened bucket and queue (the check is not vacuous)", () => {
    const stack = new Stack(new App(), "Naked");
    new Bucket(stack, "Bucket");
    new Queue(stack, "Queue");
    const rules = new AwsSolutionsChecks().validateScope(stack).violations.map((v) => v.ruleName);
    expect(rules).toEqual(
      expect.arrayContaining([
        "AwsSolutions-S1",
        "AwsSolutions-S10",
        "AwsSolutions-SQS3",
        "AwsSolutions-SQS4",
      ]),
    );
  });
});

describe("app settings", () => {
  const settings = (context: Record<string, unknown>) => readSettings(new App({ context }));

  it("defaults to a destroyable dev stage", () => {
    expect(settings({})).toEqual({ stage: "dev", dev: true, removalPolicy: "destroy" });
  });

  it("retains data outside dev", () => {
    expect(settings({ stage: "prod" })).toEqual({ stage: "prod", dev: false, removalPolicy: "retain" });
    expect(settings({ stage: "dev-alice", removalPolicy: "retain" })).toMatchObject({
      dev: true,
      removalPolicy: "retain",
    });
  });

  it("rejects bad values with a message naming the key", () => {
    expect(() => settings({ stage: "Prod_1" })).toThrow(SettingsError);
    expect(() => settings({ stage: "Prod_1" })).toThrow(/stage/);
    expect(() => settings({ removalPolicy: "sometimes" })).toThrow(/removalPolicy/);
    expect(() => settings({ stage: "prod", removalPolicy: "destroy" })).toThrow(/removalPolicy/);
  });

  it("synthesizes without an account or region, and uses the CLI's when it has them", () => {
    expect(Token.isUnresolved(prod.storage.account)).toBe(true);
    expect(Token.isUnresolved(prod.storage.region)).toBe(true);
    expect(prod.storage.terminationProtection).toBe(true);
    expect(dev.storage.terminationProtection).toBe(false);
    const { storage } = createApp({
      context: { stage: "prod" },
      processEnv: { CDK_DEFAULT_ACCOUNT: "123456789012", CDK_DEFAULT_REGION: "eu-west-1" },
    });
    expect([storage.account, storage.region]).toEqual(["123456789012", "eu-west-1"]);
  }, 180_000); // createApp bundles every function again: seconds of CPU, minutes on a loaded machine
});
