import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as z from "zod";
import { formatIssues } from "../shared/domain/resources.ts";
import { ConfigError, ValidationError } from "../shared/kernel/errors.ts";
import { componentLogger } from "../shared/kernel/logger.ts";
import type { BatchResult, QueuedNotify } from "../shared/notify/queueing.ts";
import { type AwsChat, awsChatSettings } from "../shared/runtime/aws/aws-chat.ts";
import {
  type AwsNotify,
  type AwsNotifyOptions,
  awsNotify,
  createNotifyEngine,
} from "../shared/runtime/aws/aws-notify.ts";
import { lambdaMetrics } from "../shared/runtime/aws/lambda-parts.ts";
import { coldStart, type FunctionDeps, type LambdaContext } from "./cold-start.ts";

/**
 * The notify function: webhook deliveries on AWS (shared/notify/, driven as queueing.ts says). It is
 * invoked three ways:
 *   - by the wake queue (SQS): the engine's events the notify wake rule (NOTIFY_WAKE_PATTERN) sends
 *     there; each reconciles its request and queues the deliveries it recorded;
 *   - by the delivery queue (SQS): one delivery id per message, attempted; a retry is queued again
 *     with a delay until its next time;
 *   - by the schedule (`{ "notify": "sweep" }`, every five minutes): every open subscription
 *     reconciled and every delivery due queued, so a lost wake-up or message is caught.
 * SQS batches answer with `batchItemFailures` (the event source maps report them): a message that
 * threw comes back alone and, after the queue's maxReceiveCount, goes to the dead-letter queue. A
 * receiver that refuses is not a failure here: the record keeps its own retries, then is dead
 * (GET /v1/admin/deliveries?status=dead, POST .../redrive).
 *
 * Slack and Teams threads: with the chat secret (ARBOR_CHAT_SECRET_ARN) a chat delivery is sent by
 * the thread sync through the channel's surface (progress, questions, the answer), its settings
 * (the bot tokens, the Teams app's password) read from the secret and kept five minutes.
 */
const SqsEventSchema = z.object({
  Records: z
    .array(z.looseObject({ messageId: z.string().min(1), body: z.string() }))
    .min(1, "an SQS batch has at least one record"),
});
const SweepSchema = z.union([
  z.object({ notify: z.literal("sweep") }),
  z.looseObject({ source: z.literal("aws.events"), "detail-type": z.literal("Scheduled Event") }),
]);

export interface NotifyFunctionDeps extends FunctionDeps {
  notify?: AwsNotifyOptions;
  /** The chat secret's client (default: one for ARBOR_SECRETSMANAGER_ENDPOINT or the region). */
  secretsManager?: SecretsManagerClient;
}

export type NotifyHandler = ((
  input: unknown,
  context?: LambdaContext,
) => Promise<BatchResult | { recorded: number; queued: number }>) & { close(): Promise<void> };

const log = componentLogger("notify");

export function createNotifyHandler(deps: NotifyFunctionDeps = {}): NotifyHandler {
  const metrics = deps.metrics ?? lambdaMetrics();
  let notify: AwsNotify | undefined;
  let chat: AwsChat | undefined;
  const instance = coldStart(
    { ...deps, metrics },
    ({ engine, config }) => {
      chat = awsChatSettings(config, deps.secretsManager ? { client: deps.secretsManager } : {});
      notify = awsNotify(engine.deps, config, {
        ...(deps.sqs ? { sqs: deps.sqs } : {}),
        ...(chat ? { chat: chat.settings } : {}),
        ...deps.notify,
      });
      if (!notify.queued)
        throw new ConfigError(
          "The notify function queues deliveries: set ARBOR_NOTIFY_QUEUE_URL to the delivery queue (the engine stack does)",
        );
    },
    createNotifyEngine,
  );
  const handle = async (input: unknown, context?: LambdaContext) => {
    const run = log.createChild();
    if (context?.awsRequestId) run.appendPersistentKeys({ requestId: context.awsRequestId });
    const batch = SqsEventSchema.safeParse(input);
    const sweep = batch.success ? undefined : SweepSchema.safeParse(input);
    if (!batch.success && !sweep?.success)
      throw new ValidationError(
        'Invalid notify function input: expected an SQS batch ({ "Records": [...] }) from the wake or ' +
          'delivery queue, or { "notify": "sweep" } from the schedule, as the engine stack sends them',
        formatIssues(batch.error),
      );
    const { config } = await instance.get();
    const queued = notify?.queued as QueuedNotify;
    try {
      if (batch.success) {
        const result = await queued.handle(batch.data.Records);
        metrics.add("NotifyMessages", batch.data.Records.length);
        metrics.add("NotifyMessagesFailed", result.batchItemFailures.length);
        if (result.batchItemFailures.length > 0)
          run.warn("notify batch: some messages failed", { failed: result.batchItemFailures.length });
        return result;
      }
      const swept = await queued.sweep();
      run.info("notify sweep", swept);
      metrics.add("NotifySwept", swept.queued);
      return swept;
    } finally {
      metrics.flush({ stage: config.stage ?? "unknown" });
    }
  };
  return Object.assign(handle, {
    close: async () => {
      notify?.close();
      chat?.close();
      await instance.close();
    },
  });
}

/** The Lambda entry point; configured by the environment the engine stack sets. */
export const handler = createNotifyHandler();
