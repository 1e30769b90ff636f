import { randomBytes } from "node:crypto";
import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateIndexCommand, CreateVectorBucketCommand, S3VectorsClient } from "@aws-sdk/client-s3vectors";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { inject } from "vitest";
import type { StepHandler } from "../../functions/engine-step.ts";
import {
  API_GRANTS,
  type Grant,
  NOTIFY_GRANTS,
  SENDS_NO_COMMAND,
  stepGrants,
  TOOL_FUNCTION_GRANTS,
  WATCHDOG_GRANTS,
} from "../../infra/constructs/grants.ts";
import { StepTargetInput } from "../../infra/constructs/route-rule.ts";
import { VECTOR_INDEX } from "../../infra/constructs/vector-store.ts";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { bedrockClientConfig } from "../../shared/adapters/llm/bedrock-llm.ts";
import { QUEUED_STEPS, type QueuedStep, ROUTES } from "../../shared/engine/routes.ts";
import { EVAL_ROUTE } from "../../shared/evals/driver.ts";
import { compilePattern } from "../../shared/kernel/event-pattern/index.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsConfig, loadConfig } from "../../shared/runtime/config.ts";
import { type EventBridgePeer, startEventBridgePeer } from "../peers/eventbridge-peer.ts";
import { type BedrockScript, FakeBedrock } from "../peers/fake-bedrock.ts";
import { FakeBedrockEmbeddings } from "../peers/fake-bedrock-embeddings.ts";
import { FakeS3Vectors } from "../peers/fake-s3vectors.ts";
import { type LaggingIndex, laggingIndex } from "../peers/lagging-dynamo.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";
import type { SqsRecord } from "../peers/sqs-poll.ts";
import { IamGuard, worldArns } from "../support/iam-guard.ts";

/**
 * The world the AWS integration tests run in, as the storage and engine stacks leave it before any
 * function runs: the EventBridge peer, fake Titan embeddings and fake S3 Vectors (and the fake
 * Bedrock, when the test has a model script), the real SDK clients pointed at them and at DynamoDB
 * Local and s3rver, the resources bucket, the state table, the vector bucket and its index, and the
 * configuration every function of the stack would load.
 */
export const MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
const REGION = "us-east-1";
const credentials = { accessKeyId: "test", secretAccessKey: "test" };

export interface AwsWorldOptions {
  /** Prefix of the bucket and table names (a random suffix follows), e.g. "arbor-engine". */
  name: string;
  /** The event bus's name. */
  bus: string;
  /** The model's side of the run: starts the fake Bedrock and configures it (ARBOR_MODEL=MODEL). */
  model?: BedrockScript;
  /**
   * "cedar" (default): the Cedar engine, no policies bucket. "empty-bucket": OPA, as deployed, on a
   * policies bucket nobody has published a bundle to yet (the built-in default policy decides).
   */
  policies?: "cedar" | "empty-bucket";
  /** Index reads served this many writes back (test/peers/lagging-dynamo.ts) on `clients.dynamodb`. */
  lag?: number;
  /** More configuration, or overrides of the world's own (loadConfig's environment). */
  env?: Record<string, string>;
}

export interface AwsWorld {
  config: AwsConfig;
  peer: EventBridgePeer;
  /** The SQS peer of the engine's command queues (ARBOR_COMMAND_QUEUES): a queue per queued step. */
  sqs: SqsPeer;
  commandQueues: Record<QueuedStep, string>;
  bedrock: FakeBedrock | undefined;
  titan: FakeBedrockEmbeddings;
  s3vectors: FakeS3Vectors;
  /** The table as DynamoDB Local serves it (no lag), for the operator's side and for checks. */
  dynamodb: DynamoDBClient;
  /** What the functions get: `dynamodb` is the lagging view when `lag` is set. */
  clients: { s3: S3Client; dynamodb: DynamoDBClient; eventbridge: EventBridgeClient; sqs: SQSClient };
  engineClients: {
    bedrock?: BedrockRuntimeClient;
    embeddings: BedrockRuntimeClient;
    s3vectors: S3VectorsClient;
    s3: S3Client;
  };
  /** Present when `lag` is set. */
  lagging: LaggingIndex | undefined;
  /** Destroys the clients and stops the peers. */
  close(): Promise<void>;
}

export async function startAwsWorld(options: AwsWorldOptions): Promise<AwsWorld> {
  const suffix = randomBytes(4).toString("hex");
  const { peer, endpoint: busEndpoint } = await startEventBridgePeer();
  const sqsPeer = await SqsPeer.start();
  const commandQueues = Object.fromEntries(
    QUEUED_STEPS.map((step) => [step, sqsPeer.createQueue(`${options.name}-${step}-${suffix}`)]),
  ) as Record<QueuedStep, string>;
  const bedrock = options.model === undefined ? undefined : new FakeBedrock(options.model);
  const titan = new FakeBedrockEmbeddings();
  const s3vectors = new FakeS3Vectors();
  const [bedrockEndpoint, titanEndpoint, vectorsEndpoint] = await Promise.all([
    bedrock?.start().then((s) => s.endpoint),
    titan.start(),
    s3vectors.start(),
  ]);
  const policiesBucket = `${options.name}-policies-${suffix}`;
  const loaded = loadConfig({
    ARBOR_MODE: "aws",
    AWS_REGION: REGION,
    ARBOR_RESOURCES_BUCKET: `${options.name}-${suffix}`,
    ARBOR_TABLE_NAME: `${options.name}-${suffix}`,
    ARBOR_EVENT_BUS_NAME: options.bus,
    ARBOR_VECTOR_BUCKET: `${options.name}-vectors-${suffix}`,
    ARBOR_VECTOR_INDEX: "resources-titan-v2-1024",
    ARBOR_COMMAND_QUEUES: JSON.stringify(commandQueues),
    ...(bedrock ? { ARBOR_MODEL_PROVIDER: "bedrock", ARBOR_MODEL: MODEL } : {}),
    ...(options.policies === "empty-bucket"
      ? { ARBOR_POLICIES_BUCKET: policiesBucket }
      : { ARBOR_POLICY_ENGINE: "cedar" }),
    ...options.env,
  });
  if (loaded.mode !== "aws" || !loaded.vectors) throw new Error("expected an aws configuration with vectors");
  const config = loaded;
  const vectors = loaded.vectors;

  // s3rver accepts only its own demo key pair.
  const s3 = new S3Client({
    region: REGION,
    endpoint: inject("s3Endpoint"),
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  });
  const dynamodb = new DynamoDBClient({ region: REGION, endpoint: inject("dynamoEndpoint"), credentials });
  const eventbridge = new EventBridgeClient({ region: REGION, endpoint: busEndpoint, credentials });
  const sqs = sqsPeer.client(REGION);
  // One lagging view of the table for every function instance, as one GSI serves them all.
  const lagging = options.lag === undefined ? undefined : laggingIndex(dynamodb, { lag: options.lag });
  const engineClients: AwsWorld["engineClients"] = {
    ...(bedrockEndpoint
      ? {
          bedrock: new BedrockRuntimeClient({
            region: REGION,
            endpoint: bedrockEndpoint,
            credentials,
            ...bedrockClientConfig,
          }),
        }
      : {}),
    embeddings: new BedrockRuntimeClient({
      region: REGION,
      endpoint: titanEndpoint,
      credentials,
      maxAttempts: 1,
    }),
    s3vectors: new S3VectorsClient({ region: REGION, endpoint: vectorsEndpoint, credentials }),
    s3,
  };

  // What the storage and engine stacks create before any function runs.
  await s3.send(new CreateBucketCommand({ Bucket: config.resourcesBucket }));
  if (options.policies === "empty-bucket") await s3.send(new CreateBucketCommand({ Bucket: policiesBucket }));
  await DynamoStateStore.ensureTable(dynamodb, config.tableName);
  await engineClients.s3vectors.send(new CreateVectorBucketCommand({ vectorBucketName: vectors.bucket }));
  await engineClients.s3vectors.send(
    new CreateIndexCommand({
      vectorBucketName: vectors.bucket,
      indexName: vectors.index,
      dataType: VECTOR_INDEX.dataType,
      dimension: VECTOR_INDEX.dimension,
      distanceMetric: VECTOR_INDEX.distanceMetric,
      metadataConfiguration: { nonFilterableMetadataKeys: [...VECTOR_INDEX.nonFilterableMetadataKeys] },
      tags: { ...VECTOR_INDEX.tags },
    }),
  );

  return {
    config,
    peer,
    sqs: sqsPeer,
    commandQueues,
    bedrock,
    titan,
    s3vectors,
    dynamodb,
    clients: { s3, dynamodb: lagging?.client ?? dynamodb, eventbridge, sqs },
    engineClients,
    lagging,
    async close() {
      for (const c of [s3, dynamodb, eventbridge, sqs, ...Object.values(engineClients)]) c.destroy();
      await Promise.all([peer.stop(), sqsPeer.close(), bedrock?.stop(), titan.stop(), s3vectors.stop()]);
    },
  };
}

/**
 * Plays EventBridge and the command queues' event source mappings for the step functions: takes
 * what the peer accepted on the bus and what the command queues hold, matches every bus event
 * against the routes that have a rule (the others' commands go to their queues, and their copies
 * on the bus, for the notify path, start no step), renders the rule's input template or the SQS
 * batch, and invokes a step handler with it. A batch whose message failed throws, as a rule's
 * failed invocation does. The world and the handlers are asked for when events are delivered, so
 * the player can be made before `beforeAll` starts them; its members are arrow functions, so they
 * can be destructured.
 */
export class EventBridgePlayer {
  /** Ids of the events delivered so far (add one to have `drain` leave it undelivered). */
  readonly delivered = new Set<string>();
  /** The routes that start on a rule of the bus (RESOURCE_PUT's) and the experiments'. */
  readonly matchers = [...ROUTES.filter((r) => !isQueued(r.name)), EVAL_ROUTE].map((route) => ({
    route,
    matches: compilePattern(route.pattern),
  }));
  /** The commands taken from the queues: their events' ids, to the step and message. */
  readonly #queued = new Map<
    string,
    { subscription: string; url: string; record: SqsRecord; event: BusEnvelope }
  >();

  private readonly world: () => Pick<AwsWorld, "peer" | "sqs" | "commandQueues">;
  private readonly bus: string;
  /** The step handlers, taking the wave's invocations in turn; or one per route (each its own cold start). */
  private readonly handlers: (() => readonly StepHandler[]) | { byRoute: (route: string) => StepHandler };
  /** "waves" (default): each wave's invocations all at once, spread over the handlers; "one by one": in order. */
  private readonly delivery: "waves" | "one by one";

  constructor(
    world: () => Pick<AwsWorld, "peer" | "sqs" | "commandQueues">,
    bus: string,
    handlers: (() => readonly StepHandler[]) | { byRoute: (route: string) => StepHandler },
    delivery: "waves" | "one by one" = "waves",
  ) {
    this.world = world;
    this.bus = bus;
    this.handlers = handlers;
    this.delivery = delivery;
  }

  /**
   * Every event published so far, each once: the bus's, but for its copies of queued commands,
   * and the commands the queues hold.
   */
  readonly events = (): BusEnvelope[] => {
    const { peer, sqs, commandQueues } = this.world();
    const queuedTypes = new Set(
      ROUTES.filter((r) => isQueued(r.name)).flatMap((r) => r.pattern["detail-type"] as string[]),
    );
    const onBus = peer
      .eventsOn(this.bus)
      .filter((e) => !(queuedTypes.has(e["detail-type"]) && e.source === "arbor.engine"));
    // A command once taken stays among the events (its queue deletes it once its step is done).
    for (const url of Object.values(commandQueues))
      for (const m of sqs.messages(url)) {
        const { subscription, event } = JSON.parse(m.body) as { subscription: string; event: BusEnvelope };
        if (!this.#queued.has(event.id))
          this.#queued.set(event.id, {
            subscription,
            url,
            event,
            record: {
              messageId: m.messageId,
              receiptHandle: m.receiptHandle ?? m.messageId,
              body: m.body,
              attributes: { ApproximateReceiveCount: "1", SentTimestamp: String(m.sentAt) },
              messageAttributes: {},
              eventSource: "aws:sqs",
              eventSourceARN: sqs.arnOf(url),
              awsRegion: "us-east-1",
            },
          });
      }
    const queued = [...this.#queued.values()].map((q) => q.event);
    return [...(onBus as BusEnvelope[]), ...queued];
  };

  /** The queue a command's message came from. */
  #urlOf(record: SqsRecord): string {
    for (const { url, record: r } of this.#queued.values()) if (r.messageId === record.messageId) return url;
    return "";
  }

  /** The step function's input for one route: the rule's input template, or the queue's batch of one. */
  readonly stepInput = (subscription: string, event: BusEnvelope): unknown => {
    const queued = this.#queued.get(event.id);
    if (queued && queued.subscription === subscription) return { Records: [queued.record] };
    const { inputTemplate } = new StepTargetInput(subscription).bind(undefined as never);
    return JSON.parse(String(inputTemplate).replace("<aws.events.event.json>", () => JSON.stringify(event)));
  };

  /** Names of the routes `event` starts: its queue's step, or the rules whose pattern matches it. */
  readonly routesOf = (event: BusEnvelope): string[] => {
    const queued = this.#queued.get(event.id);
    if (queued) return [queued.subscription];
    return this.matchers.filter((m) => m.matches(event)).map((m) => m.route.name);
  };

  readonly #guards = new Map<string, IamGuard>();
  /** The guard of a route's function, on the world's clients (none for a world without them). */
  guardOf(route: string): IamGuard | undefined {
    const world = this.world() as Partial<AwsWorld>;
    if (!world.config || !world.clients) return undefined;
    let guard = this.#guards.get(route);
    if (!guard) {
      guard = functionGuard(
        world as GuardedWorld,
        stepGrants(route),
        route,
        // Its commands' queues (EngineCommands), for a step that sends any.
        SENDS_NO_COMMAND.has(route) ? [] : Object.values(world.commandQueues ?? {}),
      );
      this.#guards.set(route, guard);
    }
    return guard;
  }

  /** Delivers `events` to every route they start; returns how many invocations that made. */
  readonly deliver = async (events: readonly BusEnvelope[]): Promise<number> => {
    const inputs = events.flatMap((event) =>
      this.routesOf(event).map((route) => ({ route, input: this.stepInput(route, event) })),
    );
    // A queued command is taken as its event source mapping would: in flight, no longer waiting.
    for (const event of events) {
      const queued = this.#queued.get(event.id);
      if (queued) this.world().sqs.take(queued.url, queued.record.messageId);
    }
    const given = this.handlers;
    const handlers = typeof given === "function" ? given() : [];
    const invoke = async (shared: StepHandler | undefined, { route, input }: (typeof inputs)[number]) => {
      const handler = typeof given === "function" ? shared : given.byRoute(route);
      // Each route's function holds only its own grants (infra/constructs/grants.ts): its calls are checked.
      const guard = this.guardOf(route);
      const run = async () => handler?.(input);
      const result = await (guard ? guard.within(run) : run());
      // A refusal a step swallowed (logged, retried later) is still a right the stack does not give.
      if (guard && guard.denied.length > 0)
        throw new Error(
          `the ${route} step was refused what its grants do not allow: ${guard.denied.join("; ")}`,
        );
      const failed = result && "batchItemFailures" in result ? result.batchItemFailures : [];
      if (failed.length > 0) throw new Error(`the step failed on message ${failed[0]?.itemIdentifier}`);
      // Its step done, a queued command is deleted, as its event source mapping would.
      const queued = (input as { Records?: SqsRecord[] }).Records?.[0];
      if (queued) this.world().sqs.lose(this.#urlOf(queued), (m) => m.messageId === queued.messageId);
    };
    if (this.delivery === "one by one") for (const input of inputs) await invoke(handlers[0], input);
    else await Promise.all(inputs.map((input, i) => invoke(handlers[i % handlers.length], input)));
    return inputs.length;
  };

  /**
   * Plays the bus and the queues until both are quiet: every event is delivered once, wave by
   * wave; events `held` says are left undelivered. Returns how many invocations that made.
   */
  readonly drain = async (held: (e: BusEnvelope) => boolean = () => false): Promise<number> => {
    let invocations = 0;
    for (let wave = 0; wave < 100; wave++) {
      const fresh = this.events().filter((e) => !this.delivered.has(e.id) && !held(e));
      if (fresh.length === 0) return invocations;
      for (const e of fresh) this.delivered.add(e.id);
      invocations += await this.deliver(fresh);
    }
    throw new Error("the bus did not settle within 100 waves");
  };
}

type GuardedWorld = Pick<AwsWorld, "config" | "commandQueues"> &
  Partial<Pick<AwsWorld, "clients" | "engineClients">>;

/** The ARNs of this world's resources, as the grants name them. */
function arnsOf({ config }: Pick<AwsWorld, "config">) {
  return worldArns({
    resourcesBucket: config.resourcesBucket,
    ...(config.policy.engine === "opa" ? { policiesBucket: config.policy.bucket } : {}),
    table: config.tableName,
    bus: config.eventBusName,
  });
}

/**
 * A function's grants around its calls in this world (on every client the world gives out), and
 * the resources it is given on its own (its queues): its calls within `guarded` are checked.
 */
export function functionGuard(
  world: GuardedWorld,
  grants: readonly Grant[],
  label: string,
  also: readonly string[] = [],
): IamGuard {
  const guard = new IamGuard(grants, arnsOf(world), also, label);
  for (const client of [...Object.values(world.clients ?? {}), ...Object.values(world.engineClients ?? {})])
    if (client) guard.instrument(client);
  return guard;
}

/**
 * The tool function's grants (TOOL_FUNCTION_GRANTS), and its own extra rights: the turn command's
 * queue (a settled remote call goes on).
 */
export function toolFunctionGuard(world: GuardedWorld): IamGuard {
  return functionGuard(world, TOOL_FUNCTION_GRANTS, "tool", [world.commandQueues.turn]);
}

/**
 * The API function's grants (API_GRANTS), and the queues it sends to: a request's plan, a resume, a
 * leaf's turn after a remote agent's push, a delivery.
 */
export function apiGuard(world: GuardedWorld): IamGuard {
  const { commandQueues, config } = world;
  return functionGuard(world, API_GRANTS, "api", [
    commandQueues.plan,
    commandQueues.resume,
    commandQueues.turn,
    ...(config.notify?.queueUrl ? [config.notify.queueUrl] : []),
  ]);
}

/** The watchdog's grants (WATCHDOG_GRANTS), and every command's queue (it sends any lost one again). */
export function watchdogGuard(world: GuardedWorld): IamGuard {
  return functionGuard(world, WATCHDOG_GRANTS, "watchdog", Object.values(world.commandQueues));
}

/**
 * The notify function's grants (NOTIFY_GRANTS), on the clients it is given besides the world's
 * (its own SQS client), and its queues: the wake-ups and deliveries it takes and sends again.
 */
export function notifyGuard(
  world: GuardedWorld,
  queues: readonly string[],
  clients: readonly {
    middlewareStack: { add(m: unknown, o: { step: "initialize"; name: string }): void };
  }[] = [],
): IamGuard {
  // Its chat secret is read with its own policy (ChatSecretAccess), apart from its data's.
  const secret = world.config.chat?.secretId;
  const guard = functionGuard(world, NOTIFY_GRANTS, "notify", [...queues, ...(secret ? [secret] : [])]);
  for (const client of clients) guard.instrument(client);
  return guard;
}

/** A function's handler held to its grants: each call runs within `guard`, and fails on a refusal it swallowed. */
export function guarded<T extends (...args: never[]) => Promise<unknown>>(guard: IamGuard, handler: T): T {
  const run = async (...args: Parameters<T>) => {
    const result = await guard.within(() => handler(...args));
    if (guard.denied.length > 0)
      throw new Error(`the function was refused what its grants do not allow: ${guard.denied.join("; ")}`);
    return result;
  };
  return Object.assign(run, handler) as unknown as T;
}

const isQueued = (step: string): boolean => (QUEUED_STEPS as readonly string[]).includes(step);
