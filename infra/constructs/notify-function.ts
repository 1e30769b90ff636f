import { Duration, type RemovalPolicy } from "aws-cdk-lib";
import { type CfnRule, type IEventBus, Rule, RuleTargetInput, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction, SqsQueue } from "aws-cdk-lib/aws-events-targets";
import type { IGrantable, IManagedPolicy } from "aws-cdk-lib/aws-iam";
import { SqsEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import type { RetentionDays } from "aws-cdk-lib/aws-logs";
import { type IQueue, Queue, QueueEncryption } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { NOTIFY_WAKE_PATTERN, NOTIFY_WAKE_RULE } from "../../shared/notify/wakeups.ts";
import { EngineFunction } from "./engine-function.ts";

/**
 * Webhook deliveries on AWS (functions/notify.ts): the notify function, fed by two SQS queues and
 * a schedule.
 * - The wake rule on the Arbor bus (NOTIFY_WAKE_PATTERN, one rule: EventBridge takes its top-level
 *   `$or`) sends the engine's events that may mean a request moved to the wake queue, which buffers
 *   bursts; the function reconciles each request and queues the deliveries it recorded.
 * - The delivery queue holds one delivery id per message (the function's own retries, with a delay,
 *   and what the API function records); the function attempts each.
 * - The sweep schedule (every five minutes) reconciles every open subscription and queues what is
 *   due: a lost wake-up, a lost message, a dead holder's lease.
 * Both queues: SSE-SQS, SSL only, a visibility timeout six times the function's (AWS's advice for
 * an event source), partial batch failures; a message the function fails `MAX_RECEIVES` times goes to
 * the stack's dead-letter queue (`arbor dlq redrive` sends it back to its queue). A receiver that
 * refuses is not such a failure: the delivery's record keeps its own retries for an hour, then is
 * dead, visible and redriven through the admin routes (GET /v1/admin/deliveries?status=dead).
 *
 * Grants, least privilege (NOTIFY_GRANTS, infra/constructs/grants.ts): the state table (reads, and
 * conditional writes of the notify path's own records: subscriptions, deliveries, chat threads), the
 * resources bucket read-only (the answers the pushes carry), the two queues. No model, no
 * embeddings, no vector index, no tool, no policy bundle, no event publishing, no delete.
 */
export const NOTIFY_FUNCTION = { timeout: Duration.minutes(1), memorySize: 512 } as const;
/** Times the function may fail one message before SQS moves it to the dead-letter queue. */
export const MAX_RECEIVES = 5;
export const NOTIFY_SWEEP_EVERY = Duration.minutes(5);
export const NOTIFY_BATCH_SIZE = 10;
/**
 * Concurrent invocations each queue's event source may run. A receiver that never answers holds
 * an invocation for the attempt's timeout, but a tenant holds at most its lane's attempts at once
 * (shared/notify/lanes.ts, 8 per tenant): the rest of its deliveries come back "busy" and are
 * queued again later, so the other tenants' deliveries find invocations free.
 */
export const NOTIFY_MAX_CONCURRENCY = 50;

export interface NotifyFunctionProps {
  /** The engine functions' environment (the model's and the tools' settings are left out). */
  readonly environment: Record<string, string>;
  readonly eventBus: IEventBus;
  /** Its data rights (NOTIFY_GRANTS in grants.ts, made into a policy by the stack). */
  readonly dataPolicy: IManagedPolicy;
  readonly deadLetterQueue: IQueue;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
}

export class NotifyFunction extends Construct {
  readonly handler: EngineFunction;
  readonly wakeQueue: Queue;
  readonly deliveries: Queue;
  readonly wakeRule: Rule;
  readonly sweepSchedule: Rule;
  readonly policy: IManagedPolicy;

  constructor(scope: Construct, id: string, props: NotifyFunctionProps) {
    super(scope, id);
    const queue = (name: string) =>
      new Queue(this, name, {
        encryption: QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        visibilityTimeout: Duration.seconds(NOTIFY_FUNCTION.timeout.toSeconds() * 6),
        retentionPeriod: Duration.days(4),
        removalPolicy: props.removalPolicy,
        deadLetterQueue: { queue: props.deadLetterQueue, maxReceiveCount: MAX_RECEIVES },
      });
    this.wakeQueue = queue("WakeQueue");
    this.deliveries = queue("DeliveryQueue");
    this.policy = props.dataPolicy;

    const {
      ARBOR_MODEL_PROVIDER: _p,
      ARBOR_MODEL: _m,
      ARBOR_TOOLS_FILE: _t,
      ARBOR_VECTOR_BUCKET: _vb,
      ARBOR_VECTOR_INDEX: _vi,
      ARBOR_POLICIES_BUCKET: _pb,
      ...environment
    } = props.environment;
    this.handler = new EngineFunction(this, "Function", {
      ...NOTIFY_FUNCTION,
      entry: "functions/notify.ts",
      description:
        "Arbor notify function: webhook deliveries (A2A push, HTTP callbacks) from the wake and delivery queues",
      environment: {
        ...environment,
        // It decides nothing: the channels checked the caller before a subscription was recorded.
        ARBOR_POLICY_ENGINE: "cedar",
        ARBOR_NOTIFY_QUEUE_URL: this.deliveries.queueUrl,
      },
      policies: [this.policy],
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      // The schedule's run: the next one, five minutes later, does the same work.
      retryAttempts: 0,
      maxEventAge: NOTIFY_SWEEP_EVERY,
    });
    const fn = this.handler.function;
    for (const q of [this.wakeQueue, this.deliveries])
      fn.addEventSource(
        new SqsEventSource(q, {
          batchSize: NOTIFY_BATCH_SIZE,
          reportBatchItemFailures: true,
          maxConcurrency: NOTIFY_MAX_CONCURRENCY,
        }),
      );
    // Retries and the deliveries a wake-up records go back on the delivery queue.
    this.deliveries.grantSendMessages(fn);

    this.wakeRule = new Rule(this, "WakeRule", {
      eventBus: props.eventBus,
      ruleName: NOTIFY_WAKE_RULE,
      description: "The engine's events that may mean a request moved: the notify function reconciles it",
      // Replaced below: CDK's EventPattern type has no `$or`.
      eventPattern: { source: ["arbor"] },
      targets: [
        new SqsQueue(this.wakeQueue, {
          retryAttempts: 8,
          maxEventAge: Duration.hours(1),
          deadLetterQueue: props.deadLetterQueue,
        }),
      ],
    });
    // The whole pattern, as it is (a property override would merge it into the placeholder's fields).
    (this.wakeRule.node.defaultChild as CfnRule).eventPattern = NOTIFY_WAKE_PATTERN;

    this.sweepSchedule = new Rule(this, "SweepSchedule", {
      description: "Runs the Arbor notify sweep: what a lost wake-up or message missed is queued",
      schedule: Schedule.rate(NOTIFY_SWEEP_EVERY),
      targets: [
        new LambdaFunction(fn, { event: RuleTargetInput.fromObject({ notify: "sweep" }), retryAttempts: 0 }),
      ],
    });
  }

  /** What another function needs to queue deliveries (the API function: a subscription's first, a redrive). */
  grantQueue(grantee: IGrantable): void {
    this.deliveries.grantSendMessages(grantee);
  }
}
