import * as z from "zod";
import { formatIssues } from "../shared/domain/resources.ts";
import { withinStepTime } from "../shared/engine/claims.ts";
import { ROUTES, type StepName } from "../shared/engine/routes.ts";
import { EVAL_ROUTE, onEvalEvent } from "../shared/evals/driver.ts";
import { ValidationError } from "../shared/kernel/errors.ts";
import { componentLogger } from "../shared/kernel/logger.ts";
import { EVENT_ID_DETAIL_KEY, lambdaMetrics } from "../shared/runtime/aws/lambda-parts.ts";
import { coldStart, type FunctionDeps, type LambdaContext, traced } from "./cold-start.ts";

/**
 * One engine step (a route of shared/engine/routes.ts, or the experiments' EVAL_ROUTE of
 * shared/evals/driver.ts) as a Lambda function, given `{ subscription: <route name>, event: <the
 * event> }`: by its EventBridge rule (the rule's input transformer) for the steps that start on
 * RESOURCE_PUT and for experiments, or in the messages of its SQS queue for the steps started by
 * a command (QUEUED_STEPS; sqs-command-queues.ts). The function hands the event to the bus, which
 * runs only that route's handler. Every step is idempotent, so redeliveries are harmless; a
 * step that throws makes the invocation fail, and Lambda retries it, then dead-letters it.
 */
type Subscription = StepName | typeof EVAL_ROUTE.name;
const STEP_NAMES: [Subscription, ...Subscription[]] = [EVAL_ROUTE.name, ...ROUTES.map((r) => r.name)];

export const StepInputSchema = z.object({
  subscription: z.enum(STEP_NAMES),
  // The bus checks the whole envelope; these are the fields the logs need.
  event: z.looseObject({
    id: z.string().min(1),
    source: z.string().min(1),
    "detail-type": z.string().min(1),
    detail: z.record(z.string(), z.unknown()),
  }),
});

export type StepInput = z.infer<typeof StepInputSchema>;

/** A batch from a step's command queue (the event source mapping's): each body is a StepInput. */
const SqsBatchSchema = z.object({
  Records: z
    .array(z.looseObject({ messageId: z.string().min(1), body: z.string() }))
    .min(1, "an SQS batch has at least one record"),
});

/** What an SQS batch is answered with: the messages that failed come back, the others are done. */
export interface BatchResult {
  batchItemFailures: { itemIdentifier: string }[];
}

export type StepHandler = ((input: unknown, context?: LambdaContext) => Promise<BatchResult | undefined>) & {
  close(): Promise<void>;
};

const log = componentLogger("engine-step");

export function createStepHandler(deps: FunctionDeps = {}): StepHandler {
  const metrics = deps.metrics ?? lambdaMetrics();
  const instance = coldStart({ ...deps, metrics }, ({ engine }) => {
    engine.start();
    // Experiments (shared/evals/driver.ts): their own rule invokes this bundle with `eval`.
    engine.deps.bus.subscribe({
      name: EVAL_ROUTE.name,
      pattern: EVAL_ROUTE.pattern,
      handler: (event) => onEvalEvent(engine, event),
    });
  });
  /**
   * A batch from a command queue: each message one step, all at once; a message whose step throws
   * is reported, so only it comes back (after the queue's visibility timeout), and after the
   * queue's maxReceiveCount it goes to the dead-letter queue. A body that is no step input is
   * logged and dropped: sending it again would not help.
   */
  const handleBatch = async (records: { messageId: string; body: string }[], context?: LambdaContext) => {
    const failed: { itemIdentifier: string }[] = [];
    await Promise.all(
      records.map(async (record) => {
        let body: unknown;
        try {
          body = JSON.parse(record.body);
        } catch {
          body = undefined;
        }
        const parsed = StepInputSchema.safeParse(body);
        if (!parsed.success) {
          log.error("a command queue's message is no step input; dropped", {
            messageId: record.messageId,
            problems: body === undefined ? ["not JSON"] : formatIssues(parsed.error),
          });
          return;
        }
        try {
          await handleStep(parsed.data, context);
        } catch {
          failed.push({ itemIdentifier: record.messageId });
        }
      }),
    );
    return { batchItemFailures: failed };
  };
  const handle = async (input: unknown, context?: LambdaContext): Promise<BatchResult | undefined> => {
    const batch = SqsBatchSchema.safeParse(input);
    if (batch.success) return handleBatch(batch.data.Records, context);
    const parsed = StepInputSchema.safeParse(input);
    if (!parsed.success) {
      throw new ValidationError(
        "Invalid engine step input: expected { subscription: <route name>, event: <EventBridge event> }, " +
          "as the engine stack's rules send it, or an SQS batch of them from a command queue",
        formatIssues(parsed.error),
      );
    }
    await handleStep(parsed.data, context);
    return undefined;
  };
  const handleStep = async ({ subscription, event }: StepInput, context?: LambdaContext): Promise<void> => {
    const step = log.createChild();
    step.appendPersistentKeys({
      subscription,
      correlationId: stringOr(event.detail[EVENT_ID_DETAIL_KEY], event.id),
      eventBridgeId: event.id,
      detailType: event["detail-type"],
      ...urnOf(event.detail),
      ...(context?.awsRequestId ? { requestId: context.awsRequestId } : {}),
    });
    const started = Date.now();
    let stage = "unknown";
    try {
      const { rt, config } = await instance.get();
      stage = config.stage ?? stage;
      // The step's resource notices published before it ends (a frozen instance sends nothing).
      const dispatch = () => rt.bus.dispatch(event, { subscription }).then(() => rt.resources.settled());
      // Claims taken in this step end soon after the invocation's timeout (shared/engine/claims.ts),
      // so Lambda's retry of a step that timed out takes its work over.
      const remaining = context?.getRemainingTimeInMillis?.bind(context);
      await (remaining ? withinStepTime(remaining, dispatch) : dispatch());
      step.info("step done", { durationMs: Date.now() - started });
      metrics.add("StepSucceeded", 1);
    } catch (error) {
      step.error("step failed; Lambda retries the invocation, then sends it to the dead-letter queue", {
        durationMs: Date.now() - started,
        error: error instanceof Error ? error : String(error),
      });
      metrics.add("StepFailed", 1);
      throw error;
    } finally {
      // With the model's calls, tokens and tool calls this step made (cold-start.ts).
      metrics.add("StepDuration", Date.now() - started, "Milliseconds");
      metrics.flush({ stage, route: subscription });
    }
  };
  const tracedHandle = (input: unknown, context?: LambdaContext) => traced(() => handle(input, context));
  return Object.assign(tracedHandle, { close: instance.close });
}

/** The Lambda entry point; configured by the environment the engine stack sets. */
export const handler = createStepHandler();

const stringOr = (value: unknown, fallback: string): string =>
  typeof value === "string" && value.length > 0 ? value : fallback;

/** The URN a command concerns, so every log line of a step names its task (or message, interaction). */
function urnOf(detail: Record<string, unknown>): { urn?: string } {
  for (const key of ["taskId", "urn", "messageUrn", "interactionUrn"]) {
    const value = detail[key];
    if (typeof value === "string") return { urn: value };
  }
  return {};
}
