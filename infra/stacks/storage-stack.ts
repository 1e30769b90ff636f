import { CfnOutput, Duration, type RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import type { Table } from "aws-cdk-lib/aws-dynamodb";
import type { EventBus } from "aws-cdk-lib/aws-events";
import type { Bucket } from "aws-cdk-lib/aws-s3";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import { S3_SERVER_ACCESS_LOGS_USE_BUCKET_POLICY } from "aws-cdk-lib/cx-api";
import type { Construct } from "constructs";
import { ArborEventBus } from "../constructs/event-bus.ts";
import { AccessLogBucket, SecureBucket } from "../constructs/secure-bucket.ts";
import { StateTable } from "../constructs/state-table.ts";

export interface StorageStackProps extends StackProps {
  /** Deployment stage, e.g. `dev`, `prod`; names the event bus `arbor-<stage>`. */
  readonly stage: string;
  /** For everything that holds data: RETAIN outside dev. */
  readonly removalPolicy: RemovalPolicy;
  /** DynamoDB deletion protection; on outside dev. */
  readonly deletionProtection: boolean;
  /** Default 90 days. */
  readonly noncurrentVersionRetention?: Duration;
  /** Default 365 days. */
  readonly accessLogRetention?: Duration;
  /** Default 90 days. */
  readonly eventArchiveRetention?: Duration;
}

/** What later stacks and functions need to reach the storage layer (CDK tokens until deployed). */
export interface StorageOutputs {
  readonly resourcesBucketName: string;
  readonly policiesBucketName: string;
  readonly accessLogsBucketName: string;
  readonly tableName: string;
  readonly eventBusName: string;
  readonly eventBusArn: string;
  readonly eventArchiveName: string;
  readonly deadLetterQueueArn: string;
  readonly deadLetterQueueUrl: string;
}

/** The CloudFormation output key of each value: stable, so scripts can read them by name. */
export const STORAGE_OUTPUT_KEYS = {
  resourcesBucketName: "ResourcesBucketName",
  policiesBucketName: "PoliciesBucketName",
  accessLogsBucketName: "AccessLogsBucketName",
  tableName: "StateTableName",
  eventBusName: "EventBusName",
  eventBusArn: "EventBusArn",
  eventArchiveName: "EventArchiveName",
  deadLetterQueueArn: "DeadLetterQueueArn",
  deadLetterQueueUrl: "DeadLetterQueueUrl",
} as const satisfies Record<keyof StorageOutputs, string>;

const OUTPUT_DESCRIPTIONS: Record<keyof StorageOutputs, string> = {
  resourcesBucketName: "Resources bucket: each resource is stored as <urn>.json",
  policiesBucketName: "Policies bucket: OPA bundles (policy.wasm and its sha256)",
  accessLogsBucketName: "Server access logs of the resources and policies buckets",
  tableName: "State store and event log table (layout: shared/adapters/aws/dynamo-schema.ts)",
  eventBusName: "Domain event bus",
  eventBusArn: "Domain event bus ARN",
  eventArchiveName: "Archive of every event on the bus, for replay",
  deadLetterQueueArn: "Dead-letter queue for EventBridge rule targets (ARN)",
  deadLetterQueueUrl: "Dead-letter queue for EventBridge rule targets (URL)",
};

/**
 * Arbor's storage layer: the resources and policies buckets (with their access log bucket), the
 * state table, and the event bus with its archive and dead-letter queue.
 */
export class StorageStack extends Stack {
  readonly stage: string;
  readonly resourcesBucket: Bucket;
  readonly policiesBucket: Bucket;
  readonly accessLogsBucket: Bucket;
  readonly table: Table;
  readonly eventBus: EventBus;
  readonly deadLetterQueue: Queue;
  readonly outputs: StorageOutputs;

  constructor(scope: Construct, id: string, props: StorageStackProps) {
    super(scope, id, props);
    // The access log bucket has ACLs disabled, so log delivery must be granted by bucket policy,
    // not by the LogDeliveryWrite ACL: pin the flag for this stack whatever the app's cdk.json says.
    this.node.setContext(S3_SERVER_ACCESS_LOGS_USE_BUCKET_POLICY, true);
    this.stage = props.stage;
    const { removalPolicy } = props;
    const noncurrentVersionRetention = props.noncurrentVersionRetention ?? Duration.days(90);

    this.accessLogsBucket = new AccessLogBucket(this, "AccessLogs", {
      removalPolicy,
      retention: props.accessLogRetention ?? Duration.days(365),
    }).bucket;
    this.resourcesBucket = new SecureBucket(this, "Resources", {
      removalPolicy,
      accessLogs: this.accessLogsBucket,
      accessLogsPrefix: "resources/",
      noncurrentVersionRetention,
    }).bucket;
    this.policiesBucket = new SecureBucket(this, "Policies", {
      removalPolicy,
      accessLogs: this.accessLogsBucket,
      accessLogsPrefix: "policies/",
      noncurrentVersionRetention,
    }).bucket;
    this.table = new StateTable(this, "State", {
      removalPolicy,
      deletionProtection: props.deletionProtection,
    }).table;
    const events = new ArborEventBus(this, "Events", {
      stage: props.stage,
      archiveRetention: props.eventArchiveRetention ?? Duration.days(90),
      removalPolicy,
    });
    this.eventBus = events.bus;
    this.deadLetterQueue = events.deadLetterQueue;

    this.outputs = {
      resourcesBucketName: this.resourcesBucket.bucketName,
      policiesBucketName: this.policiesBucket.bucketName,
      accessLogsBucketName: this.accessLogsBucket.bucketName,
      tableName: this.table.tableName,
      eventBusName: this.eventBus.eventBusName,
      eventBusArn: this.eventBus.eventBusArn,
      eventArchiveName: events.archive.archiveName,
      deadLetterQueueArn: this.deadLetterQueue.queueArn,
      deadLetterQueueUrl: this.deadLetterQueue.queueUrl,
    };
    for (const [name, key] of Object.entries(STORAGE_OUTPUT_KEYS) as [keyof StorageOutputs, string][]) {
      new CfnOutput(this, key, { value: this.outputs[name], description: OUTPUT_DESCRIPTIONS[name] });
    }
  }
}
