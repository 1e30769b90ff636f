import { AsyncLocalStorage } from "node:async_hooks";
import { performance } from "node:perf_hooks";

/**
 * What a request costs on the AWS path, counted offline: every AWS SDK call the functions make
 * (a middleware on each client), attributed to the invocation it was made in (an async context
 * around each handler call), and the events each PutEvents published, so that an invocation's
 * trigger leads back to the call that published it. From that: the calls, by operation; the
 * critical path from the API's PutEvents to the one that announces the root's output; the
 * EventBridge hops and sequential round trips on it; and its warm time, modelled from the
 * published per-call latencies of LATENCIES (the model's own calls count for nothing: the time is
 * the orchestration's).
 *
 *   const log = new AwsCallLog();
 *   log.instrument(client);                                   // every SDK client the functions use
 *   await log.within({ kind: "step", trigger: eventId }, () => handler(input));
 *   const path = log.criticalPath((e) => isRootOutput(e));    // { hops, roundTrips, modelledMs }
 *
 * Round trips: an invocation's calls in the order they started; a call that starts before every
 * call of the current round trip has ended joins it (they ran at once), else it starts the next.
 */

/** Median latencies, warm, in the region (ms): what the model of the critical path adds up. */
export const LATENCIES = {
  /** "Single-digit millisecond" reads and writes: the DynamoDB developer guide, and the issue's count. */
  DynamoDB: 5,
  /** Tens of ms for small objects (the S3 performance guidelines; first-byte latencies). */
  S3: 30,
  /** A PutEvents call (the API call itself, not the delivery). */
  "EventBridge PutEvents": 20,
  /**
   * An event from PutEvents to the rule's Lambda target starting: about 150 ms at the median
   * since EventBridge's latency work of February 2023 (PostNL Engineering's measurements,
   * medium.com/postnl-engineering/improved-eventbridge-latency-opens-up-new-use-cases-at-postnl).
   */
  "EventBridge hop": 150,
  /**
   * An SQS message to its Lambda consumer (the event source mapping's long polling keeps a receive
   * waiting): the figure of the issue that asked for this benchmark; AWS publishes none.
   */
  "SQS hop": 16,
  /** A synchronous Invoke of a warm function, over its own time (the nested invocation's, added). */
  "Lambda Invoke": 15,
  /** Titan embeddings (InvokeModel) for one short text. */
  "Bedrock InvokeModel": 40,
  /** S3 Vectors queries and writes. */
  S3Vectors: 30,
  /** SQS SendMessage. */
  SQS: 10,
} as const;

/** Calls that are the model's: not orchestration, no time and no round trip of their own. */
const MODEL_OPS = new Set(["ConverseCommand", "ConverseStreamCommand"]);

export interface Invocation {
  id: number;
  kind: "api" | "step" | "tool";
  /** The step's route, or the tool function's op. */
  name: string;
  /** The arbor-event-id of the event that started it (a step). */
  trigger?: string;
  /** How it was started: from its command queue (SQS) or by a rule (EventBridge; the default). */
  via?: "sqs" | "eventbridge";
  /** A tool invocation's event, as JSON (matched to the Invoke call that carried it). */
  payload?: string;
}

export interface PublishedEvent {
  id: string;
  detailType: string;
  detail: Record<string, unknown>;
}

export interface AwsCall {
  invocation: number;
  /** The client's service (DynamoDB, S3, EventBridge, Lambda, BedrockRuntime, S3Vectors, SQS). */
  service: string;
  op: string;
  start: number;
  end: number;
  published: PublishedEvent[];
  /** A Lambda Invoke's payload, as JSON. */
  payload?: string | undefined;
  /** What the call touched: its keys, shortened (ARBOR_BENCH_AWS_DETAIL=keys shows them). */
  what: string;
}

/** A client of the AWS SDK v3, as far as the log needs it. */
export interface InstrumentableClient {
  middlewareStack: {
    add(middleware: unknown, options: { step: "initialize"; name: string }): void;
  };
}

export interface PathCost {
  /** EventBridge hops from the API's call to the end. */
  hops: number;
  /** SQS hops (a command to its step's queue) on the way. */
  queueHops: number;
  /** Sequential round trips on the path (the model's calls not counted). */
  roundTrips: number;
  /** The modelled warm time of the path, without the model (ms). */
  modelledMs: number;
  /** Each invocation on the path, first to last: where its round trips go. */
  legs: { invocation: number; name: string; roundTrips: number; modelledMs: number }[];
}

export class AwsCallLog {
  readonly calls: AwsCall[] = [];
  readonly invocations: Invocation[] = [];
  readonly #context = new AsyncLocalStorage<number>();
  readonly #latencyScale: number;

  /**
   * `latencyScale`: each call waits its LATENCIES entry times this before it goes to the local peer
   * (0: none). The peers answer in a millisecond or two whatever the service, so without it a
   * call that would overlap a slow one on AWS (a read beside an S3 write) looks like a round trip
   * of its own; with it, which calls run at once is what it would be on AWS.
   */
  constructor(options: { latencyScale?: number } = {}) {
    this.#latencyScale = options.latencyScale ?? 0;
  }

  /** Counts every call of `client` from now on (once per client). */
  instrument(client: InstrumentableClient): void {
    client.middlewareStack.add(
      (
        next: (args: { input: Record<string, unknown> }) => Promise<unknown>,
        context: Record<string, unknown>,
      ) =>
        async (args: { input: Record<string, unknown> }) => {
          const start = performance.now();
          const service = String(context.clientName ?? "?").replace(/Client$/, "");
          const op = String(context.commandName ?? "?");
          const wait = this.#latencyScale * (MODEL_OPS.has(op) ? 0 : baseLatency(service));
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          try {
            return await next(args);
          } finally {
            this.calls.push({
              invocation: this.#context.getStore() ?? -1,
              service,
              op,
              start,
              end: performance.now(),
              published: publishedBy(args.input),
              what: whatOf(args.input),
              ...(context.commandName === "InvokeCommand" ? { payload: payloadOf(args.input) } : {}),
            });
          }
        },
      { step: "initialize", name: "arborAwsCallLog" },
    );
  }

  /** Runs `fn` as one invocation: the calls it makes are its own. */
  within<T>(invocation: Omit<Invocation, "id">, fn: () => Promise<T>): Promise<T> {
    const id = this.invocations.length;
    this.invocations.push({ ...invocation, id });
    return this.#context.run(id, fn);
  }

  /** Forgets what was logged (between requests). */
  clear(): void {
    this.calls.length = 0;
    this.invocations.length = 0;
  }

  /** The calls by `Service Op`, most first. */
  byOperation(): [string, number][] {
    const counts = new Map<string, number>();
    for (const c of this.calls) {
      const key = `${c.service} ${c.op.replace(/Command$/, "")}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].sort((a, b) => b[1] - a[1]);
  }

  /** How many EventBridge deliveries (step invocations) there were in all. */
  deliveries(): number {
    return this.invocations.filter((i) => i.kind === "step").length;
  }

  /**
   * The path to the first call that published an event `isEnd` takes, back through each
   * invocation's trigger to the API's call. Undefined when no such event was published.
   */
  criticalPath(isEnd: (e: PublishedEvent) => boolean): PathCost | undefined {
    const end = this.calls.find((c) => c.published.some(isEnd));
    if (!end) return undefined;
    const cost: PathCost = { hops: 0, queueHops: 0, roundTrips: 0, modelledMs: 0, legs: [] };
    for (let call: AwsCall | undefined = end; call; ) {
      const upTo = this.#cost(call.invocation, call);
      cost.roundTrips += upTo.roundTrips;
      cost.modelledMs += upTo.modelledMs;
      cost.legs.unshift({
        invocation: call.invocation,
        name: this.invocations[call.invocation]?.name ?? "?",
        ...upTo,
      });
      const invocation = this.invocations[call.invocation];
      const trigger: string | undefined = invocation?.trigger;
      if (!trigger) break;
      // A command the notify path also takes goes to its queue and on the bus: the step was
      // started by the one it came by.
      const by = invocation?.via === "sqs" ? "SQS" : "EventBridge";
      call = this.calls.find((c): boolean => c.service === by && c.published.some((e) => e.id === trigger));
      if (!call) break;
      // A command sent to its step's queue, or an event a rule delivers.
      if (call.service === "SQS") cost.queueHops++;
      else cost.hops++;
      cost.modelledMs += LATENCIES[call.service === "SQS" ? "SQS hop" : "EventBridge hop"];
    }
    return cost;
  }

  /**
   * The round trips of an invocation, each as the operations in it (`Service Op xN`): where a step
   * on the path spends its time (`npm run bench:aws` with ARBOR_BENCH_AWS_DETAIL=1).
   */
  roundTripsOf(invocation: number, keys = false): string[] {
    const inv = this.invocations[invocation];
    if (!inv) return [];
    const calls = this.calls
      .filter((c) => c.invocation === inv.id && !MODEL_OPS.has(c.op))
      .sort((a, b) => a.start - b.start);
    const out: Map<string, number>[] = [];
    let waveEnd = Number.NEGATIVE_INFINITY;
    for (const call of calls) {
      if (call.start >= waveEnd || out.length === 0) out.push(new Map());
      const wave = out[out.length - 1] as Map<string, number>;
      const key = `${call.service} ${call.op.replace(/Command$/, "")}${keys ? ` [${call.what}]` : ""}`;
      wave.set(key, (wave.get(key) ?? 0) + 1);
      waveEnd = call.start >= waveEnd ? call.end : Math.max(waveEnd, call.end);
    }
    return out.map((w) => [...w].map(([k, n]) => (n > 1 ? `${k} x${n}` : k)).join(" + "));
  }

  /** One invocation's round trips and modelled time, up to and with `last` (or all of them). */
  #cost(invocation: number, last?: AwsCall): { roundTrips: number; modelledMs: number } {
    const calls = this.calls
      .filter((c) => c.invocation === invocation && !MODEL_OPS.has(c.op))
      .sort((a, b) => a.start - b.start);
    let roundTrips = 0;
    let modelledMs = 0;
    let waveEnd = Number.NEGATIVE_INFINITY;
    let waveMs = 0;
    for (const call of calls) {
      if (last && call.start > last.start) break;
      const ms = this.#latency(call);
      if (call.start >= waveEnd) {
        roundTrips++;
        modelledMs += waveMs;
        waveMs = ms;
        waveEnd = call.end;
      } else {
        waveMs = Math.max(waveMs, ms);
        waveEnd = Math.max(waveEnd, call.end);
      }
    }
    return { roundTrips, modelledMs: modelledMs + waveMs };
  }

  #latency(call: AwsCall): number {
    if (call.service !== "Lambda") return baseLatency(call.service);
    // The tool function's own critical time, which the caller waits for.
    const nested = this.invocations.find((i) => i.kind === "tool" && i.payload === call.payload);
    return LATENCIES["Lambda Invoke"] + (nested ? this.#cost(nested.id).modelledMs : 0);
  }
}

/** A call's own latency by its service (a Lambda Invoke's without the invoked function's time). */
function baseLatency(service: string): number {
  switch (service) {
    case "S3":
      return LATENCIES.S3;
    case "EventBridge":
      return LATENCIES["EventBridge PutEvents"];
    case "S3Vectors":
      return LATENCIES.S3Vectors;
    case "SQS":
      return LATENCIES.SQS;
    case "BedrockRuntime":
      return LATENCIES["Bedrock InvokeModel"];
    case "Lambda":
      return LATENCIES["Lambda Invoke"];
    default:
      return LATENCIES.DynamoDB;
  }
}

/** The events a PutEvents or a SendMessageBatch of commands (sqs-command-queues.ts) carries. */
function publishedBy(input: Record<string, unknown>): PublishedEvent[] {
  const entries = input.Entries;
  if (!Array.isArray(entries)) return [];
  return entries.flatMap((e: { DetailType?: string; Detail?: string; MessageBody?: string }) => {
    try {
      if (e.MessageBody !== undefined) {
        const { event } = JSON.parse(e.MessageBody) as {
          event?: { "detail-type"?: string; detail?: Record<string, unknown> };
        };
        const detail = event?.detail ?? {};
        return [
          { id: String(detail["arbor-event-id"] ?? ""), detailType: event?.["detail-type"] ?? "", detail },
        ];
      }
      const detail = JSON.parse(e.Detail ?? "{}") as Record<string, unknown>;
      return [{ id: String(detail["arbor-event-id"] ?? ""), detailType: e.DetailType ?? "", detail }];
    } catch {
      return [];
    }
  });
}

/** A call's keys, shortened: a DynamoDB item's sort key (or partition key), an S3 object's key. */
function whatOf(input: Record<string, unknown>): string {
  const short = (k: unknown) => {
    const text = String(k ?? "").replace(/[0-9A-Za-z]{12,}/g, (id) => `${id.slice(0, 4)}…`);
    return text.length > 90 ? `${text.slice(0, 30)}…${text.slice(-56)}` : text;
  };
  const itemKey = (key: unknown) => {
    const k = (key ?? {}) as Record<string, { S?: string }>;
    return short([k.pk?.S, k.sk?.S].filter(Boolean).join(" ") || Object.values(k)[0]?.S);
  };
  if (input.Key && typeof input.Key === "string") return short(input.Key);
  if (input.Key) return itemKey(input.Key);
  if (Array.isArray(input.TransactItems))
    return (input.TransactItems as Record<string, { Key?: unknown; Item?: unknown }>[])
      .map((t) => {
        const op = Object.values(t)[0];
        return itemKey(op?.Key ?? op?.Item);
      })
      .join(", ");
  if (Array.isArray(input.Entries))
    return (input.Entries as { DetailType?: string; Detail?: string; MessageBody?: string }[])
      .map((e) => {
        const detail = (() => {
          try {
            return JSON.parse(e.Detail ?? e.MessageBody ?? "{}") as Record<string, unknown>;
          } catch {
            return {};
          }
        })();
        return `${e.DetailType ?? "message"} ${short(detail.name ?? detail.taskId ?? detail.urn ?? "")}`;
      })
      .join(", ");
  if (input.KeyConditionExpression) return short(JSON.stringify(input.ExpressionAttributeValues ?? {}));
  return "";
}

function payloadOf(input: Record<string, unknown>): string | undefined {
  const p = input.Payload;
  const text = typeof p === "string" ? p : p instanceof Uint8Array ? new TextDecoder().decode(p) : undefined;
  if (text === undefined) return undefined;
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return text;
  }
}
