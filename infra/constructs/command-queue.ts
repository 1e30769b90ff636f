import { Duration, type RemovalPolicy } from "aws-cdk-lib";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { type IQueue, Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { ConfigError } from "../../shared/kernel/errors.ts";

/**
 * A step's command queue (shared/adapters/aws/sqs-command-queues.ts): the commands that step alone
 * consumes are sent here, and its function takes them one message per invocation (a leaf's turns
 * each get a function of their own, as a rule's invocations did), at most `maxConcurrency` at once.
 *
 * A message whose step fails comes back after the visibility timeout (the function's timeout and
 * half a minute: a step still running is never handed out twice), and after MAX_RECEIVES
 * receptions the queue moves it to the storage stack's dead-letter queue, from where `arbor dlq
 * redrive` sends it back here: two retries, as Lambda gave a rule's failed invocation.
 */
export const MAX_RECEIVES = 3;
/** One message per invocation: each step runs in its own function instance, with its whole timeout. */
export const COMMAND_BATCH_SIZE = 1;
/**
 * The most instances of one step at once, by default (`-c stepConcurrency`): a wide request's
 * hundred ready leaves, each calling Bedrock, queue up instead of taking the account's
 * concurrency from the API and tool functions (and they are taken as fast as Bedrock's quota
 * allows anyway).
 */
export const DEFAULT_STEP_CONCURRENCY = 50;

export interface CommandQueueProps {
  /** Its consumer's timeout: the messages stay hidden that long, and half a minute more, while it runs. */
  readonly consumerTimeout: Duration;
  readonly deadLetterQueue: IQueue;
  readonly removalPolicy: RemovalPolicy;
}

export class CommandQueue extends Construct {
  readonly queue: Queue;

  constructor(scope: Construct, id: string, props: CommandQueueProps) {
    super(scope, id);
    this.queue = new Queue(this, "Queue", {
      encryption: QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: props.consumerTimeout.plus(Duration.seconds(30)),
      retentionPeriod: Duration.days(4),
      removalPolicy: props.removalPolicy,
      deadLetterQueue: { queue: props.deadLetterQueue, maxReceiveCount: MAX_RECEIVES },
    });
  }

  /** The step's function takes the queue's messages, one per invocation, `maxConcurrency` at once at most. */
  consumeWith(consumer: IFunction, maxConcurrency: number): void {
    consumer.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: COMMAND_BATCH_SIZE,
        reportBatchItemFailures: true,
        maxConcurrency,
      }),
    );
  }
}

/** The CDK context key of the steps' maximum concurrency per queue. */
export const STEP_CONCURRENCY_CONTEXT_KEY = "stepConcurrency";

/** `-c stepConcurrency=<n>`: 2 to 1000 (the event source mapping's bounds); absent: DEFAULT_STEP_CONCURRENCY. */
export function readStepConcurrency(scope: Construct): number {
  const value: unknown = scope.node.tryGetContext(STEP_CONCURRENCY_CONTEXT_KEY);
  if (value === undefined || value === "") return DEFAULT_STEP_CONCURRENCY;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 2 || n > 1000)
    throw new ConfigError(
      `Invalid CDK context ${STEP_CONCURRENCY_CONTEXT_KEY}=${JSON.stringify(value)}: give how many instances of one ` +
        `engine step may run at once, a whole number from 2 to 1000 (-c ${STEP_CONCURRENCY_CONTEXT_KEY}=50), or leave the key out`,
    );
  return n;
}

/** The CDK context key of how many leaves of one request run at once (ARBOR_LEAVES_AT_ONCE). */
export const LEAVES_AT_ONCE_CONTEXT_KEY = "leavesAtOnce";

/**
 * Half the steps' concurrency, by default: two wide requests run side by side at full width, and
 * one cannot take every instance of the ready step (and the model's quota) from the others.
 */
export const defaultLeavesAtOnce = (stepConcurrency: number): number =>
  Math.max(1, Math.floor(stepConcurrency / 2));

/**
 * `-c leavesAtOnce=<n>`: leaves of one request running at once (ARBOR_LEAVES_AT_ONCE,
 * shared/engine/leaf-slots.ts), 0 for no bound, at most the steps' concurrency (more could never
 * run); absent: defaultLeavesAtOnce.
 */
export function readLeavesAtOnce(scope: Construct, stepConcurrency: number): number {
  const value: unknown = scope.node.tryGetContext(LEAVES_AT_ONCE_CONTEXT_KEY);
  if (value === undefined || value === "") return defaultLeavesAtOnce(stepConcurrency);
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > stepConcurrency)
    throw new ConfigError(
      `Invalid CDK context ${LEAVES_AT_ONCE_CONTEXT_KEY}=${JSON.stringify(value)}: give how many leaves of one request ` +
        `may run at once, a whole number from 1 to the steps' concurrency (${stepConcurrency}), 0 for no bound ` +
        `(-c ${LEAVES_AT_ONCE_CONTEXT_KEY}=20), or leave the key out (half the steps' concurrency)`,
    );
  return n;
}

/** The CDK context key of how many leaves of one request run at once while the leaf steps have room. */
export const LEAVES_WHEN_IDLE_CONTEXT_KEY = "leavesWhenIdle";

/**
 * `-c leavesWhenIdle=<n>`: leaves of one request running at once while the other requests' leaf
 * steps (the ready and turn queues' commands, waiting or taken) number fewer than the room above
 * `leavesAtOnce` (ARBOR_LEAVES_WHEN_IDLE, shared/engine/leaf-slots.ts), from `leavesAtOnce` to the
 * steps' concurrency, 0 for never; absent: the steps' concurrency (a wide request on a quiet
 * deployment uses every step no other request needs).
 */
export function readLeavesWhenIdle(scope: Construct, stepConcurrency: number, leavesAtOnce: number): number {
  const value: unknown = scope.node.tryGetContext(LEAVES_WHEN_IDLE_CONTEXT_KEY);
  if (value === undefined || value === "") return leavesAtOnce ? stepConcurrency : 0;
  const n = Number(value);
  if (!Number.isInteger(n) || (n !== 0 && (n < leavesAtOnce || n > stepConcurrency)))
    throw new ConfigError(
      `Invalid CDK context ${LEAVES_WHEN_IDLE_CONTEXT_KEY}=${JSON.stringify(value)}: give how many leaves of one request ` +
        `may run at once while the leaf steps have room, a whole number from leavesAtOnce (${leavesAtOnce}) to the steps' ` +
        `concurrency (${stepConcurrency}), 0 for never (-c ${LEAVES_WHEN_IDLE_CONTEXT_KEY}=${stepConcurrency}), ` +
        "or leave the key out (the steps' concurrency)",
    );
  return n;
}
