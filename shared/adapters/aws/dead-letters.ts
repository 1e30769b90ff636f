import { type EventBridgeClient, ListTargetsByRuleCommand } from "@aws-sdk/client-eventbridge";
import { InvokeCommand, type LambdaClient } from "@aws-sdk/client-lambda";
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueUrlCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { ConfigError, UnavailableError } from "../../kernel/errors.ts";
import { COMMAND_MESSAGE_KIND } from "./sqs-command-queues.ts";

/** A command message's body: `{ subscription, event }`, or undefined when it is not one. */
function stepInputOf(body: string): { subscription: string; event: Record<string, unknown> } | undefined {
  try {
    const parsed = JSON.parse(body) as { subscription?: unknown; event?: unknown };
    return typeof parsed.subscription === "string" && typeof parsed.event === "object" && parsed.event
      ? { subscription: parsed.subscription, event: parsed.event as Record<string, unknown> }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The storage stack's dead-letter queue, read for a redrive. Two kinds of message land there
 * (functions/README.md "When a step fails"):
 * - a step's asynchronous invocation that failed every Lambda attempt: the body is the payload
 *   the rule sent (`{"subscription": <route>, "event": <event>}`), the attributes Lambda's
 *   `RequestID`, `ErrorCode` and `ErrorMessage`; the function is not named, so it is found from
 *   the route: the rule of that name on the Arbor bus targets it (ListTargetsByRule);
 * - an event EventBridge could not hand to a step's function at all: the body is the event, the
 *   attributes `RULE_ARN`, `TARGET_ARN`, `ERROR_CODE`, `ERROR_MESSAGE` (and the retry condition);
 *   the payload is rebuilt as the rule's input transformer builds it (route-rule.ts).
 * - a message SQS moved here from one of the notify function's queues or a step's command queue (its
 *   redrive policy, after the function failed it maxReceiveCount times; a command carries the
 *   attribute `arbor-message: engine.command` and the step's input as its body): the system attribute `DeadLetterQueueSourceArn`
 *   names the queue; the body (a delivery id, or a wake-up event) goes back to that queue as it is.
 * Either of the first two goes back to its function as an asynchronous invocation (`InvocationType: Event`). Every
 * step is idempotent (it re-reads state and writes conditionally), so sending one again that did
 * partly run, or twice, is harmless.
 */
export interface DeadLetter {
  messageId: string;
  receiptHandle: string;
  origin: "lambda" | "eventbridge" | "sqs" | "unknown";
  /** `sqs`: the queue it was moved from, where it goes back (a notify queue). */
  sourceQueueArn?: string;
  /** `sqs`: its message attributes, sent back with it. */
  attributes?: Record<string, MessageAttributeValue>;
  /** The route (the rule's name and the payload's `subscription`). */
  route?: string;
  /** The function it goes back to: EventBridge names it; for Lambda, see `DeadLetterQueue.functionFor`. */
  functionArn?: string;
  ruleArn?: string;
  /** The error attributes as Lambda or EventBridge put them. */
  errors: Record<string, string>;
  receiveCount?: number;
  sentAt?: string;
  /** What goes back to the function. */
  payload?: { subscription: string; event: Record<string, unknown> };
  /** Why it cannot be sent back (then it stays in the queue). */
  problem?: string;
  body: string;
}

const LAMBDA_ATTRIBUTES = ["RequestID", "ErrorCode", "ErrorMessage"];
const EVENTBRIDGE_ATTRIBUTES = [
  "RULE_ARN",
  "TARGET_ARN",
  "ERROR_CODE",
  "ERROR_MESSAGE",
  "EXHAUSTED_RETRY_CONDITION",
  "RETRY_ATTEMPTS",
];
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
const isEvent = (v: unknown): v is Record<string, unknown> =>
  isObject(v) && typeof v.id === "string" && typeof v["detail-type"] === "string" && isObject(v.detail);

/**
 * What a message is and what would go back where: pure, so a dry run shows exactly what a redrive
 * does. `routes`: the names of the engine's routes (engine/routes.ts), the only places a message goes back to.
 */
export function readDeadLetter(message: Message, routes: ReadonlySet<string>): DeadLetter {
  const attrs: Record<string, string> = {};
  for (const [k, v] of Object.entries(message.MessageAttributes ?? {}))
    if (v.StringValue !== undefined) attrs[k] = v.StringValue;
  const system = message.Attributes ?? {};
  const base = {
    messageId: message.MessageId ?? "",
    receiptHandle: message.ReceiptHandle ?? "",
    body: message.Body ?? "",
    ...(system.ApproximateReceiveCount ? { receiveCount: Number(system.ApproximateReceiveCount) } : {}),
    ...(system.SentTimestamp ? { sentAt: new Date(Number(system.SentTimestamp)).toISOString() } : {}),
  };
  if (system.DeadLetterQueueSourceArn) {
    const kind = attrs["arbor-message"];
    // A step's command (sqs-command-queues.ts): its body is the step's input, shown by its route.
    const command = kind === COMMAND_MESSAGE_KIND ? stepInputOf(base.body) : undefined;
    return {
      ...base,
      origin: "sqs",
      errors: {},
      sourceQueueArn: system.DeadLetterQueueSourceArn,
      attributes: message.MessageAttributes ?? {},
      route: command?.subscription ?? kind ?? system.DeadLetterQueueSourceArn.split(":").pop() ?? "?",
      ...(command ? { payload: command } : {}),
    };
  }
  let body: unknown;
  try {
    body = JSON.parse(base.body);
  } catch {
    body = undefined;
  }
  if (attrs.RULE_ARN !== undefined || attrs.TARGET_ARN !== undefined) {
    const errors = pick(attrs, EVENTBRIDGE_ATTRIBUTES.slice(2));
    const route = attrs.RULE_ARN?.split("/").pop();
    const letter = {
      ...base,
      origin: "eventbridge" as const,
      errors,
      ...(attrs.RULE_ARN ? { ruleArn: attrs.RULE_ARN } : {}),
      ...(attrs.TARGET_ARN ? { functionArn: attrs.TARGET_ARN } : {}),
      ...(route ? { route } : {}),
    };
    if (!route || !routes.has(route))
      return { ...letter, problem: `rule ${attrs.RULE_ARN ?? "(none)"} is not a route of this engine` };
    if (!attrs.TARGET_ARN) return { ...letter, problem: "EventBridge named no TARGET_ARN" };
    // The body is the event; a step payload (an older transformer's) is taken as it is.
    if (isObject(body) && body.subscription === route && isEvent(body.event))
      return { ...letter, payload: { subscription: route, event: body.event } };
    if (!isEvent(body)) return { ...letter, problem: "the body is not an EventBridge event" };
    return { ...letter, payload: { subscription: route, event: body } };
  }
  if (LAMBDA_ATTRIBUTES.some((k) => attrs[k] !== undefined)) {
    const letter = { ...base, origin: "lambda" as const, errors: pick(attrs, LAMBDA_ATTRIBUTES) };
    if (!isObject(body) || typeof body.subscription !== "string" || !isEvent(body.event))
      return { ...letter, problem: "the body is not a step's input ({ subscription, event })" };
    if (!routes.has(body.subscription))
      return {
        ...letter,
        route: body.subscription,
        problem: `${body.subscription} is not a route of this engine`,
      };
    return {
      ...letter,
      route: body.subscription,
      payload: { subscription: body.subscription, event: body.event },
    };
  }
  return {
    ...base,
    origin: "unknown",
    errors: attrs,
    problem: "neither Lambda's nor EventBridge's error attributes: not sent anywhere",
  };
}

const pick = (attrs: Record<string, string>, keys: readonly string[]) =>
  Object.fromEntries(keys.filter((k) => attrs[k] !== undefined).map((k) => [k, attrs[k] as string]));

export interface DeadLetterQueueOptions {
  sqs: SQSClient;
  lambda: LambdaClient;
  events: EventBridgeClient;
  queueUrl: string;
  /** The Arbor bus: each route's rule on it names the route's function. */
  eventBusName: string | undefined;
  /** The names of the engine's routes (engine/routes.ts): a message for anything else is left in the queue. */
  routes: readonly string[];
  /** How long a received message stays hidden from other readers while it is handled. */
  visibilitySeconds?: number;
}

export class DeadLetterQueue {
  readonly #o: DeadLetterQueueOptions;
  readonly #functions = new Map<string, Promise<string>>();
  readonly #seen = new Set<string>();

  readonly #routes: ReadonlySet<string>;

  constructor(options: DeadLetterQueueOptions) {
    this.#o = options;
    this.#routes = new Set(options.routes);
  }

  /**
   * Up to `max` messages, each once: a message seen again (its visibility ran out while we were
   * busy, or a dry run) ends the reading.
   */
  async receive(max: number): Promise<DeadLetter[]> {
    const want = Math.min(10, max - this.#seen.size);
    if (want <= 0) return [];
    const out = await this.#o.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: this.#o.queueUrl,
        MaxNumberOfMessages: want,
        VisibilityTimeout: this.#o.visibilitySeconds ?? 120,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["ApproximateReceiveCount", "SentTimestamp", "DeadLetterQueueSourceArn"],
      }),
    );
    const fresh: DeadLetter[] = [];
    for (const m of out.Messages ?? []) {
      if (!m.MessageId || this.#seen.has(m.MessageId)) continue;
      this.#seen.add(m.MessageId);
      fresh.push(readDeadLetter(m, this.#routes));
    }
    return fresh;
  }

  /** The function a route's rule targets on the Arbor bus. */
  functionFor(route: string): Promise<string> {
    let found = this.#functions.get(route);
    if (!found) {
      found = this.#lookUp(route);
      this.#functions.set(route, found);
    }
    return found;
  }

  async #lookUp(route: string): Promise<string> {
    if (!this.#o.eventBusName)
      throw new ConfigError(
        "A failed Lambda invocation does not name its function: say which bus routes the steps with --bus or ARBOR_EVENT_BUS_NAME (the storage stack's EventBusName)",
      );
    const out = await this.#o.events.send(
      new ListTargetsByRuleCommand({ Rule: route, EventBusName: this.#o.eventBusName }),
    );
    const arns = (out.Targets ?? [])
      .map((t) => t.Arn)
      .filter((a): a is string => !!a && a.includes(":lambda:"));
    if (arns.length !== 1)
      throw new ConfigError(
        `The rule ${route} on ${this.#o.eventBusName} targets ${arns.length} Lambda functions, not one: is this the engine's bus?`,
      );
    return arns[0] as string;
  }

  /** Sends the payload back to its function (asynchronously), or a queue's message back to its queue; throws unless accepted. */
  async resend(letter: DeadLetter): Promise<string> {
    if (letter.sourceQueueArn) return this.#requeue(letter, letter.sourceQueueArn);
    if (!letter.payload || !letter.route) throw new ConfigError(letter.problem ?? "nothing to send");
    const fn = letter.functionArn ?? (await this.functionFor(letter.route));
    const out = await this.#o.lambda.send(
      new InvokeCommand({
        FunctionName: fn,
        InvocationType: "Event",
        Payload: Buffer.from(JSON.stringify(letter.payload)),
      }),
    );
    const status = out.StatusCode ?? 0;
    if (status < 200 || status >= 300 || out.FunctionError)
      throw new UnavailableError(
        `Lambda did not accept the invocation of ${fn}: status ${status}${out.FunctionError ? `, ${out.FunctionError}` : ""}`,
      );
    return fn;
  }

  async #requeue(letter: DeadLetter, arn: string): Promise<string> {
    const [, , service, , account, name] = arn.split(":");
    if (service !== "sqs" || !account || !name)
      throw new ConfigError(`DeadLetterQueueSourceArn ${arn} does not name an SQS queue`);
    const { QueueUrl } = await this.#o.sqs.send(
      new GetQueueUrlCommand({ QueueName: name, QueueOwnerAWSAccountId: account }),
    );
    await this.#o.sqs.send(
      new SendMessageCommand({
        QueueUrl,
        MessageBody: letter.body,
        ...(letter.attributes && Object.keys(letter.attributes).length > 0
          ? { MessageAttributes: letter.attributes }
          : {}),
      }),
    );
    return `queue ${name}`;
  }

  /** Only after a resend was accepted. */
  async remove(letter: DeadLetter): Promise<void> {
    await this.#o.sqs.send(
      new DeleteMessageCommand({ QueueUrl: this.#o.queueUrl, ReceiptHandle: letter.receiptHandle }),
    );
  }

  /** Visible again at once (a dry run, or a message left in the queue). */
  async release(letter: DeadLetter): Promise<void> {
    await this.#o.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.#o.queueUrl,
        ReceiptHandle: letter.receiptHandle,
        VisibilityTimeout: 0,
      }),
    );
  }
}
