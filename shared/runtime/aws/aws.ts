import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { S3Client } from "@aws-sdk/client-s3";
import { SQSClient } from "@aws-sdk/client-sqs";
import { DynamoStateStore } from "../../adapters/aws/dynamo-state-store.ts";
import { EventBridgeEventBus } from "../../adapters/aws/eventbridge-event-bus.ts";
import { S3ObjectStore } from "../../adapters/aws/s3-object-store.ts";
import { SqsCommandQueues } from "../../adapters/aws/sqs-command-queues.ts";
import { EventLogAudit } from "../../adapters/shared/event-log-audit.ts";
import { COMMANDS } from "../../engine/context.ts";
import { QUEUED_STEPS, ROUTES } from "../../engine/routes.ts";
import { NOTIFY_WAKE_PATTERN } from "../../notify/wakeups.ts";
import { resourceAnnouncer } from "../../store/resource-events.ts";
import { ResourceStore } from "../../store/resource-store.ts";
import { TaskLog } from "../../store/task-log.ts";
import type { AwsConfig } from "../config.ts";
import type { Runtime } from "../runtime.ts";

/**
 * The AWS composition root: S3 for resources, DynamoDB for state and the event log, EventBridge for
 * events. Clients are created once per Lambda cold start; credentials come from the default chain.
 */
export interface AwsRuntime extends Runtime {
  readonly bus: EventBridgeEventBus;
  readonly objects: S3ObjectStore;
}

export interface AwsClients {
  s3?: S3Client;
  dynamodb?: DynamoDBClient;
  eventbridge?: EventBridgeClient;
  /** For the command queues (ARBOR_COMMAND_QUEUES). */
  sqs?: SQSClient;
}

export function createAwsRuntime(config: AwsConfig, clients: AwsClients = {}): AwsRuntime {
  const at = (endpoint: string | undefined) => ({ region: config.region, ...(endpoint ? { endpoint } : {}) });
  const s3 =
    clients.s3 ??
    new S3Client({ ...at(config.endpoints.s3), forcePathStyle: config.endpoints.s3 !== undefined });
  const dynamodb = clients.dynamodb ?? new DynamoDBClient(at(config.endpoints.dynamodb));
  const eventbridge = clients.eventbridge ?? new EventBridgeClient(at(config.endpoints.eventbridge));

  const objects = new S3ObjectStore({
    client: s3,
    bucket: config.resourcesBucket,
    keyPrefix: config.resourcesPrefix,
  });
  const state = new DynamoStateStore({ client: dynamodb, tableName: config.tableName });
  const sqs = config.commandQueues ? (clients.sqs ?? new SQSClient(at(config.endpoints.sqs))) : undefined;
  const commands = sqs && config.commandQueues ? commandQueues(config, sqs) : undefined;
  const bus = new EventBridgeEventBus({
    client: eventbridge,
    eventBusName: config.eventBusName,
    region: config.region,
    ...(commands ? { commands } : {}),
  });
  // A write does not wait for its notice; each function waits for them all before it returns.
  const resources = new ResourceStore(objects, {
    announcer: resourceAnnouncer(bus, config.resourceEvents, { deferred: true }),
  });
  return {
    mode: "aws",
    tenant: config.tenant,
    objects,
    state,
    bus,
    // Every writer announces its writes the same way (resource-events.ts).
    resources,
    tasks: new TaskLog(state),
    audit: new EventLogAudit(state), // audit#<task> streams in the state table
    // The queues of the steps that run leaves (their starts, their next turns): their commands
    // waiting or being run (a request's leaves' bound gives way while others' are few).
    ...(commands?.queues(COMMANDS.ready)
      ? {
          leafSteps: async () => {
            const counts = await Promise.all([COMMANDS.ready, COMMANDS.turn].map((c) => commands.inQueue(c)));
            return counts.reduce((sum: number, n) => sum + (n ?? 0), 0);
          },
        }
      : {}),
    // S3 and DynamoDB acknowledge a write once it is stored durably: nothing to wait for.
    untilDurable: () => Promise.resolve(),
    async close() {
      // Notices still going out are sent (a command-line tool on AWS writes, then closes).
      await resources.settled().catch(() => undefined);
      await bus.close();
      if (!clients.s3) s3.destroy();
      if (!clients.dynamodb) dynamodb.destroy();
      if (!clients.eventbridge) eventbridge.destroy();
      if (!clients.sqs) sqs?.destroy();
    },
  };
}

/**
 * The engine's commands that go to their steps' queues: each queued step's command (its route's
 * one detail-type) to the queue ARBOR_COMMAND_QUEUES names. The notify path's wake rule takes some
 * commands too (a task started, a request planned: shared/notify/wakeups.ts): those go on the bus
 * as well.
 */
function commandQueues(config: AwsConfig, client: SQSClient) {
  const queues: Record<string, { subscription: string; queueUrl: string }> = {};
  for (const step of QUEUED_STEPS) {
    const queueUrl = config.commandQueues?.[step];
    const detailType = ROUTES.find((r) => r.name === step)?.pattern["detail-type"];
    if (queueUrl && Array.isArray(detailType) && typeof detailType[0] === "string")
      queues[detailType[0]] = { subscription: step, queueUrl };
  }
  return new SqsCommandQueues({ client, queues, alsoOnBus: NOTIFY_WAKE_PATTERN, region: config.region });
}
