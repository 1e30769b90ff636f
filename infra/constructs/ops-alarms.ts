import { CfnOutput, Duration, type Stack, Validations } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import type { IBucket } from "aws-cdk-lib/aws-s3";
import { Topic } from "aws-cdk-lib/aws-sns";
import { EmailSubscription } from "aws-cdk-lib/aws-sns-subscriptions";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import * as z from "zod";
import { METRICS_NAMESPACE, METRICS_SERVICE } from "../../shared/adapters/aws/emf-metrics.ts";
import { BUNDLE_FILE } from "../../shared/adapters/policy/policy-bundle-s3.ts";
import { ConfigError } from "../../shared/kernel/errors.ts";

/**
 * The operations of a deployed engine: CloudWatch alarms on what needs a person, all sent to one
 * SNS topic (optionally with an email subscription, `-c alarmEmail=<address>`):
 * - dead letters: the storage stack's dead-letter queue holds anything (`arbor dlq redrive`);
 * - the engine's steps failing on and on (`StepFailed`, the EMF metric every step writes, summed
 *   over the routes): a step that fails is retried, so one failure is no news; ten in 15 minutes
 *   are. Work that gave up is the dead-letter queue's alarm;
 * - the functions callers wait on (`addCallee`: the API and the tool function): their errors (a
 *   few in five minutes) and throttles (any: a caller got a refusal);
 * - watchdog re-drives: the watchdog sent work again because it had stopped moving (the EMF metric
 *   `WatchdogRedriven` that functions/watchdog.ts writes), any in fifteen minutes;
 * - the notify function's delivery queue: its oldest message older than 20 minutes (`addQueueAge`;
 *   a retry or a busy lane delays a message by 15 minutes at most), and its wake queue: 5 minutes;
 * - the HTTP API: 5xx answers, and its p99 latency (`addApi`);
 * - the state table's throttled reads and writes (`addTable`), Bedrock's throttling of the model
 *   (`addModel`).
 * Each alarm also tells the topic when it is OK again.
 */
export const ALARM_EMAIL_CONTEXT_KEY = "alarmEmail";

/** Alarm periods and thresholds; the tests and infra/README.md read them from here. */
export const ALARMS = {
  deadLetters: { period: Duration.minutes(5), threshold: 0 },
  /** The steps' failures, summed over the routes: each is retried, so a few are transients. */
  stepFailures: { period: Duration.minutes(15), threshold: 10 },
  /** A function a caller waits on (API, tool function) failing: a few in five minutes. */
  calleeErrors: { period: Duration.minutes(5), threshold: 5 },
  /** ...or refused for its concurrency: each refusal is a caller refused. */
  throttles: { period: Duration.minutes(5), threshold: 1 },
  /** The watchdog failing two of its three runs in 15 minutes: nothing re-drives stalled work meanwhile. */
  watchdogErrors: { period: Duration.minutes(15), threshold: 2 },
  watchdogRedrives: { period: Duration.minutes(15), threshold: 1 },
  /** The oldest webhook delivery waiting in its queue, in seconds (busy lanes and retries delay some by design). */
  oldestDelivery: { period: Duration.minutes(5), threshold: 20 * 60 },
  /** The oldest wake-up waiting in the notify wake queue, in seconds: it should move within a minute. */
  oldestWakeup: { period: Duration.minutes(5), threshold: 5 * 60 },
  /**
   * The oldest command waiting in a step's queue, in seconds: a step starts within a second, so five
   * minutes means the step fails on it, is throttled, or is held at its maximum concurrency.
   */
  oldestCommand: { period: Duration.minutes(5), threshold: 5 * 60 },
  /** API Gateway's 5xx answers: a few in five minutes (one is a transient the client retries). */
  api5xx: { period: Duration.minutes(5), threshold: 5 },
  /** API Gateway's p99 latency, in ms (A2A's blocking sends wait up to 25 s by design: above that). */
  apiLatencyP99: { period: Duration.minutes(15), threshold: 30_000 },
  /** DynamoDB's throttled reads and writes on the state table: one is enough (on-demand should absorb them). */
  tableThrottles: { period: Duration.minutes(5), threshold: 1 },
  /** Bedrock's throttled invocations of the model: the adapter retries with backoff; many are a quota to raise. */
  modelThrottles: { period: Duration.minutes(5), threshold: 10 },
} as const;

export interface AlarmedFunction {
  /** A short name for the alarms, e.g. `PlanStep`. */
  readonly label: string;
  readonly fn: IFunction;
}

export interface OpsAlarmsProps {
  readonly stage: string;
  readonly deadLetterQueue: IQueue;
  /** Functions callers wait on (alarms on their errors and throttles: `addCallee`). */
  readonly callees?: readonly AlarmedFunction[];
  /** The watchdog (an alarm on its own failures: `addWatchdog`). */
  readonly watchdog?: IFunction;
  /** Subscribed to the alarm topic (it must confirm the subscription from the email AWS sends). */
  readonly alarmEmail?: string;
}

export class OpsAlarms extends Construct {
  readonly topic: Topic;
  readonly alarms: Alarm[] = [];
  readonly #stage: string;

  constructor(scope: Construct, id: string, props: OpsAlarmsProps) {
    super(scope, id);
    this.#stage = props.stage;
    this.topic = new Topic(this, "AlarmTopic", {
      displayName: `Arbor ${props.stage} alarms`,
      enforceSSL: true,
    });
    Validations.of(this.topic).acknowledge({
      id: "AwsSolutions-SNS2",
      reason:
        "The topic carries CloudWatch alarm notices only (alarm names, states and metric values), no " +
        "customer data. Encrypting it needs a customer managed KMS key whose policy admits CloudWatch " +
        "(the AWS managed SNS key cannot), a key to pay for and manage for no confidentiality gained.",
    });
    if (props.alarmEmail) this.topic.addSubscription(new EmailSubscription(props.alarmEmail));

    this.#alarm("DeadLetters", props.deadLetterQueue.metricApproximateNumberOfMessagesVisible(), {
      ...ALARMS.deadLetters,
      statistic: "Maximum",
      comparison: ComparisonOperator.GREATER_THAN_THRESHOLD,
      description:
        "Arbor's dead-letter queue holds messages: steps that failed every retry, events EventBridge " +
        "could not deliver, or notify messages the notify function failed five times. Look at them and send them back with `arbor dlq redrive` (infra/README.md).",
    });
    this.#alarm(
      "WatchdogRedrives",
      new Metric({
        namespace: METRICS_NAMESPACE,
        metricName: "WatchdogRedriven",
        dimensionsMap: { service: METRICS_SERVICE, stage: props.stage },
      }),
      {
        ...ALARMS.watchdogRedrives,
        statistic: "Sum",
        comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        description:
          "The Arbor watchdog sent work again that had stopped moving (a lost event, a crashed step). " +
          "Its log says which tasks; the steps' errors and the dead-letter queue usually say why.",
      },
    );
    // Every step writes StepFailed under its stage and route (functions/engine-step.ts): summed
    // over the routes with a Metrics Insights query, one alarm for all the steps.
    this.#alarm(
      "StepFailures",
      new MathExpression({
        expression: `SELECT SUM(StepFailed) FROM SCHEMA("${METRICS_NAMESPACE}", route, service, stage) WHERE service = '${METRICS_SERVICE}' AND stage = '${props.stage}'`,
        period: ALARMS.stepFailures.period,
        label: "Arbor steps failed",
      }),
      {
        ...ALARMS.stepFailures,
        statistic: "Sum",
        comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        description:
          `Arbor ${props.stage}'s engine steps failed ${ALARMS.stepFailures.threshold} times or more in 15 minutes. ` +
          "Each failed step is retried, so this is a fault that lasts: the steps' logs (their route, event id " +
          "and URN) say which and why; what gave up is in the dead-letter queue (its own alarm).",
      },
    );
    for (const f of props.callees ?? []) this.addCallee(f);
    if (props.watchdog) this.addWatchdog(props.watchdog);
  }

  /**
   * An alarm on the age of the oldest message of a queue that should keep moving (the notify
   * function's delivery queue): its consumers are stuck or too few.
   */
  addQueueAge(
    label: string,
    queue: IQueue,
    description: string,
    bound: { period: Duration; threshold: number } = ALARMS.oldestDelivery,
  ): void {
    this.#alarm(`${label}OldestMessage`, queue.metricApproximateAgeOfOldestMessage(), {
      ...bound,
      statistic: "Maximum",
      comparison: ComparisonOperator.GREATER_THAN_THRESHOLD,
      description,
    });
  }

  /** Alarms on API Gateway's 5xx answers and its p99 latency. */
  addApi(label: string, stage: { metricServerError(): IMetric; metricLatency(): IMetric }): void {
    this.#alarm(`${label}5xx`, stage.metricServerError(), {
      ...ALARMS.api5xx,
      statistic: "Sum",
      comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      description: `Arbor ${this.#stage}'s HTTP API answered 5xx: the API function failed or timed out. Its log group says why.`,
    });
    this.#alarm(`${label}LatencyP99`, stage.metricLatency(), {
      ...ALARMS.apiLatencyP99,
      statistic: "p99",
      comparison: ComparisonOperator.GREATER_THAN_THRESHOLD,
      description: `Arbor ${this.#stage}'s HTTP API is slow at the 99th percentile (over ${ALARMS.apiLatencyP99.threshold / 1000} s): the API function waits on the state table, the tool function or its cold starts.`,
    });
  }

  /** An alarm on the state table's throttled reads and writes. */
  addTable(label: string, table: { metric(name: string): IMetric }): void {
    const expression = new MathExpression({
      expression: "reads + writes",
      usingMetrics: {
        reads: table.metric("ReadThrottleEvents"),
        writes: table.metric("WriteThrottleEvents"),
      },
      period: ALARMS.tableThrottles.period,
      label: `${label} throttled requests`,
    });
    this.#alarm(`${label}Throttles`, expression, {
      ...ALARMS.tableThrottles,
      statistic: "Sum",
      comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      description: `Arbor ${this.#stage}'s state table throttled reads or writes: a hot key (one request's wide tree) or the account's table quota.`,
    });
  }

  /** An alarm on Bedrock's throttling of the model. */
  addModel(modelId: string): void {
    this.#alarm(
      "ModelThrottles",
      new Metric({
        namespace: "AWS/Bedrock",
        metricName: "InvocationThrottles",
        dimensionsMap: { ModelId: modelId },
      }),
      {
        ...ALARMS.modelThrottles,
        statistic: "Sum",
        comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        description: `Bedrock throttled Arbor ${this.#stage}'s calls of ${modelId}: the steps retry with backoff, but this many means the account's quota for the model is too low.`,
      },
    );
  }

  /** An alarm on the watchdog's own failures: the next run does the same work, but two failing in a row is a fault. */
  addWatchdog(fn: IFunction): void {
    this.#alarm("WatchdogErrors", fn.metricErrors(), {
      ...ALARMS.watchdogErrors,
      statistic: "Sum",
      comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      description: `Arbor ${this.#stage}'s watchdog failed twice or more in 15 minutes: stalled work is not re-driven and running experiments are not swept. Its log group says why.`,
    });
  }

  /**
   * Alarms on the errors and throttles of a function a caller waits on (the API function behind API
   * Gateway, the tool function behind a step): there, a failure or a refusal reaches someone.
   * The steps and the notify function are retried by their queues: their alarms are StepFailures,
   * the queues' ages and the dead-letter queue.
   */
  addCallee({ label, fn }: AlarmedFunction): void {
    this.#alarm(`${label}Errors`, fn.metricErrors(), {
      ...ALARMS.calleeErrors,
      statistic: "Sum",
      comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      description: `Arbor ${this.#stage} ${label} failed ${ALARMS.calleeErrors.threshold} invocations or more in five minutes, each one a caller's failure. Its log group has the errors.`,
    });
    this.#alarm(`${label}Throttles`, fn.metricThrottles(), {
      ...ALARMS.throttles,
      statistic: "Sum",
      comparison: ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      description: `Arbor ${this.#stage} ${label} was throttled: its reserved concurrency (-c apiConcurrency, -c toolConcurrency) or the account's is used up, and a caller was refused.`,
    });
  }

  #alarm(
    id: string,
    metric: IMetric,
    o: {
      period: Duration;
      threshold: number;
      statistic: string;
      comparison: ComparisonOperator;
      description: string;
    },
  ): void {
    const alarm = new Alarm(this, id, {
      alarmDescription: o.description,
      metric:
        metric instanceof MathExpression
          ? metric
          : (metric as Metric).with({ period: o.period, statistic: o.statistic }),
      threshold: o.threshold,
      comparisonOperator: o.comparison,
      evaluationPeriods: 1,
      // No data is nothing wrong: no invocations, no re-drives, an empty queue.
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    const action = new SnsAction(this.topic);
    alarm.addAlarmAction(action);
    alarm.addOkAction(action);
    this.alarms.push(alarm);
  }
}

/** `-c alarmEmail=<address>`, checked; undefined without the key. */
export function readAlarmEmail(scope: Construct): string | undefined {
  const value: unknown = scope.node.tryGetContext(ALARM_EMAIL_CONTEXT_KEY);
  if (value === undefined || value === "") return undefined;
  const parsed = z.email().safeParse(value);
  if (!parsed.success)
    throw new ConfigError(
      `Invalid CDK context ${ALARM_EMAIL_CONTEXT_KEY}=${JSON.stringify(value)}: give an email address (-c ${ALARM_EMAIL_CONTEXT_KEY}=ops@example.com), or leave the key out`,
    );
  return parsed.data;
}

/** `-c apiConcurrency=<n>` and `-c toolConcurrency=<n>`: the concurrency reserved for those functions. */
export const CONCURRENCY_CONTEXT_KEYS = { api: "apiConcurrency", tools: "toolConcurrency" } as const;

/**
 * The concurrency reserved for the API and tool functions, each 1-1000 or unset (the default: a new
 * account's whole Lambda concurrency can be 10, and reserving from it fails the deployment). Reserved,
 * a wide request's hundred steps calling Bedrock cannot take the API's or the tools' share of the
 * account, and neither can grow past it.
 */
export function readReservedConcurrency(scope: Construct): { api?: number; tools?: number } {
  const out: { api?: number; tools?: number } = {};
  for (const [which, key] of Object.entries(CONCURRENCY_CONTEXT_KEYS) as ["api" | "tools", string][]) {
    const value: unknown = scope.node.tryGetContext(key);
    if (value === undefined || value === "") continue;
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 1000)
      throw new ConfigError(
        `Invalid CDK context ${key}=${JSON.stringify(value)}: give the concurrency to reserve, a whole number from 1 to 1000 (-c ${key}=20), or leave the key out`,
      );
    out[which] = n;
  }
  return out;
}

/** The CloudFormation output keys that say where the operations' pieces are. */
export const OPS_OUTPUT_KEYS = {
  alarmTopic: "AlarmTopicArn",
  deadLetterQueueUrl: "DeadLetterQueueUrl",
  policyBundleLocation: "PolicyBundleLocation",
  policyUntilPublished: "PolicyUntilPublished",
  metricsNamespace: "MetricsNamespace",
} as const;

/** Outputs on the stack itself, so their keys stay exactly OPS_OUTPUT_KEYS. */
export function addOpsOutputs(
  stack: Stack,
  props: { ops: OpsAlarms; deadLetterQueue: IQueue; policiesBucket: IBucket },
): void {
  new CfnOutput(stack, OPS_OUTPUT_KEYS.alarmTopic, {
    value: props.ops.topic.topicArn,
    description:
      "SNS topic of the Arbor alarms (dead letters, function errors and throttles, watchdog re-drives)",
  });
  new CfnOutput(stack, OPS_OUTPUT_KEYS.deadLetterQueueUrl, {
    value: props.deadLetterQueue.queueUrl,
    description: "Dead-letter queue of the engine steps: ARBOR_DLQ_URL for `arbor dlq redrive`",
  });
  new CfnOutput(stack, OPS_OUTPUT_KEYS.policyBundleLocation, {
    value: `s3://${props.policiesBucket.bucketName}/${BUNDLE_FILE}`,
    description:
      "Where the OPA bundle goes: `arbor policy publish <bundle.tar.gz> --bucket <PoliciesBucketName>` " +
      "(its sha256 travels with it); running functions take it within 5 minutes",
  });
  new CfnOutput(stack, OPS_OUTPUT_KEYS.policyUntilPublished, {
    value: "the built-in default policy (policies/arbor.cedar)",
    description: "What decides while the policies bucket has no bundle; the functions log a WARN saying so",
  });
  new CfnOutput(stack, OPS_OUTPUT_KEYS.metricsNamespace, {
    value: METRICS_NAMESPACE,
    description:
      "CloudWatch namespace of the step, token and tool-call metrics (dimensions service, stage, route)",
  });
}
