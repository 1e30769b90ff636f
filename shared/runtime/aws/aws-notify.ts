import { SQSClient } from "@aws-sdk/client-sqs";
import { SqsDeliveryQueue } from "../../adapters/aws/sqs-delivery-queue.ts";
import { chatSurfaces } from "../../channels/chat/chat-routes.ts";
import type { EngineDeps } from "../../engine/context.ts";
import type { Engine } from "../../engine/engine.ts";
import { ConfigError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import type { ChatSettingsSource } from "../../notify/chat/types.ts";
import { QueuedNotify } from "../../notify/queueing.ts";
import { NotifyService, type NotifySettings } from "../../notify/service.ts";
import { notifyUrls } from "../../notify/urls.ts";
import type { GuardOptions } from "../../outbound/guard.ts";
import type { DeliveryQueue } from "../../ports/delivery-queue.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { VectorIndex } from "../../ports/vector-index.ts";
import type { AwsConfig } from "../config.ts";
import { defaultPolicy, engineOn } from "../engine-wiring.ts";
import type { AwsRuntime } from "./aws.ts";
import { NO_MODEL, NO_TOOLS } from "./aws-api-engine.ts";
import type { AwsEngineOptions } from "./aws-engine.ts";

/**
 * The notify path on the AWS runtime. How to drive it:
 *
 *   const engine = await createNotifyEngine(rt, config, options);     // the notify function's engine
 *   const notify = awsNotify(engine.deps, config, { sqs });           // the service and its SQS queue
 *   await notify.queued?.handle(records); await notify.queued?.sweep();
 *
 * The notify function's engine reads and writes the state (tasks, outputs, subscriptions,
 * deliveries) and nothing else: no model, no embeddings, no vector index, no tools, no policy
 * bundle (the channels decided who may subscribe before anything was recorded), so its role has
 * no grant for any of them. The API function builds its NotifyService the same way on its own
 * engine, and with ARBOR_NOTIFY_QUEUE_URL queues what it records (a subscription's first
 * notification, a redrive) at once; without it the schedule's sweep finds them.
 *
 * Webhooks go through notifyUrls (shared/notify/urls.ts): https only. On Lambda the loopback
 * switch (ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP) is refused by loadConfig, and the stack never sets it.
 *
 * Chat threads (Slack, Teams): with `chat` (the chat secret's settings, shared/runtime/aws/aws-chat.ts)
 * the service gets the channels' surfaces (shared/channels/chat/chat-routes.ts chatSurfaces): a chat
 * delivery is sent by the thread sync through them. The Teams surface calls the Bot Connector with
 * the same guarded fetch the webhooks go through (the service URL came from an activity).
 */
export interface AwsNotifyOptions {
  /** The delivery queue's client (default: one for ARBOR_SQS_ENDPOINT or the region). */
  sqs?: SQSClient;
  /** A queue already made (tests); replaces ARBOR_NOTIFY_QUEUE_URL's. */
  queue?: DeliveryQueue;
  settings?: Partial<NotifySettings>;
  /** Tests: how names are resolved by the outbound guard. */
  guard?: GuardOptions;
  random?: () => number;
  /** The chat channels' settings: Slack and Teams deliveries are sent (the notify function's). */
  chat?: ChatSettingsSource;
}

export interface AwsNotify {
  service: NotifyService;
  /** The queue-driven path; undefined without a queue (ARBOR_NOTIFY_QUEUE_URL). */
  queued: QueuedNotify | undefined;
  close(): void;
}

export function awsNotify(deps: EngineDeps, config: AwsConfig, options: AwsNotifyOptions = {}): AwsNotify {
  const urls = notifyUrls(config.outbound, {
    allowLoopbackHttp: config.notify?.allowLoopbackHttp,
    allow: config.notify?.allow,
    ports: config.notify?.ports,
    ...(options.guard ? { guard: options.guard } : {}),
  });
  const surfaces = options.chat
    ? chatSurfaces(options.chat, { fetch: urls.fetch, state: deps.state, clock: deps.clock })
    : undefined;
  const service = new NotifyService({
    deps,
    urls,
    ...(surfaces ? { surfaces } : {}),
    ...(options.settings ? { settings: options.settings } : {}),
    ...(options.random ? { random: options.random } : {}),
  });
  const queueUrl = config.notify?.queueUrl;
  const owned =
    !options.queue && !options.sqs && queueUrl
      ? new SQSClient({
          region: config.region,
          ...(config.endpoints.sqs ? { endpoint: config.endpoints.sqs } : {}),
        })
      : undefined;
  const client = options.sqs ?? owned;
  const queue =
    options.queue ?? (queueUrl && client ? new SqsDeliveryQueue({ client, queueUrl }) : undefined);
  return {
    service,
    queued: queue ? new QueuedNotify(service, queue, componentLogger("notify")) : undefined,
    close: () => owned?.destroy(),
  };
}

/** The engine of the notify function: the state, and nothing that runs work (see above). */
export function createNotifyEngine(
  rt: AwsRuntime,
  _config: AwsConfig,
  options: AwsEngineOptions = {},
): Promise<Engine> {
  return Promise.resolve(
    engineOn(
      rt,
      { llm: NO_MODEL, embedder: NO_EMBEDDER, index: NO_INDEX, tools: NO_TOOLS },
      { ...options, policy: options.policy ?? defaultPolicy() },
    ),
  );
}

const notHere = () =>
  new ConfigError(
    "The notify function embeds nothing and searches nothing: a call here is a wiring mistake " +
      "(the engine step functions do that work)",
  );

const NO_EMBEDDER: Embedder = {
  id: "none (notify function)",
  dimension: 1,
  embed: () => Promise.reject(notHere()),
};

const NO_INDEX: VectorIndex = {
  space: { embedderId: NO_EMBEDDER.id, dimension: 1 },
  upsert: () => Promise.reject(notHere()),
  query: () => Promise.reject(notHere()),
  delete: () => Promise.reject(notHere()),
};
