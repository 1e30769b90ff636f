import type { RateLimits } from "../../channels/http/rate-limit.ts";
import type { PriceOverrides } from "../../domain/model-catalogue.ts";
import type { QueuedStep } from "../../engine/routes.ts";
import { ConfigError } from "../../kernel/errors.ts";
import type { OutboundSettings } from "../../outbound/policy.ts";
import { type Env, type ModelConfig, type NotifyConfig, sharedSettings, webhookReach } from "./env.ts";

export interface AwsConfig {
  mode: "aws";
  /** ARBOR_STAGE, e.g. dev or prod. */
  stage?: string;
  model?: ModelConfig;
  tenant: string;
  region: string;
  resourcesBucket: string;
  resourcesPrefix: string;
  tableName: string;
  eventBusName: string;
  /** Where the engine's embeddings live; the engine refuses to start without it. */
  vectors?: { bucket: string; index: string };
  /** The watchdog's idea of "stopped moving". */
  watchdogStaleMs: number;
  /** ARBOR_RESOURCE_EVENTS (store/resource-events.ts): `all` adds a task's transcript, `off` only outputs; absent: `default`. */
  resourceEvents?: "default" | "all" | "off";
  /** `bedrock` serves the embedder; the model's own endpoint is in `model`. */
  endpoints: {
    s3?: string;
    dynamodb?: string;
    eventbridge?: string;
    s3vectors?: string;
    bedrock?: string;
    sqs?: string;
    secretsmanager?: string;
    /** Where the tool function is invoked (ARBOR_LAMBDA_ENDPOINT: a local peer, a VPC endpoint). */
    lambda?: string;
  };
  /** The tool registry's JSON file (ARBOR_TOOLS_FILE, bundled with the functions); absent: the built-ins. */
  toolsFile?: string;
  /** The default team's file (ARBOR_TEAM_FILE, bundled with the functions); absent: DEFAULT_TEAM. */
  teamFile?: string;
  /** Who decides: an OPA bundle from the policies bucket (the default), or the built-in Cedar policy. */
  policy: { engine: "cedar" } | { engine: "opa"; bucket: string; prefix: string; recheckMs: number };
  /** What the outbound guard lets through (ARBOR_OUTBOUND_*); absent: public addresses, ports 80 and 443. */
  outbound?: OutboundSettings;
  /** Webhook deliveries (ARBOR_NOTIFY_*); absent: https only. */
  notify?: NotifyConfig;
  /** The engine's command queues by step (ARBOR_COMMAND_QUEUES); absent: every command goes on the bus. */
  commandQueues?: Partial<Record<QueuedStep, string>>;
  /** The tool function that runs every tool call (ARBOR_TOOL_FUNCTION); absent: tools run in process. */
  toolFunction?: string;
  /** Where callers reach the API function (ARBOR_PUBLIC_URL, the stack sets the API's endpoint). */
  publicUrl?: string;
  /** How long a blocking A2A send waits (ARBOR_A2A_BLOCKING_WAIT_MS); the stack sets 25 s. */
  a2aBlockingWaitMs?: number;
  /** A leaf's context window in tokens (ARBOR_CONTEXT_TOKENS); absent: the engine's default. */
  contextTokens?: number;
  /** How long a failing model is retried before its task fails (ARBOR_MODEL_RETRY_MS); absent: the engine's default. */
  modelRetryMs?: number;
  /** The operator's prices by model id (ARBOR_MODEL_PRICES), over the catalogue's. */
  modelPrices?: PriceOverrides;
  /** Leaves of one request running at once (ARBOR_LEAVES_AT_ONCE, 0: no bound); absent: the engine's default. */
  leavesAtOnce?: number;
  /** Leaves of one request running at once while the leaf steps have room (ARBOR_LEAVES_WHEN_IDLE, 0: the bound always holds). */
  leavesWhenIdle?: number;
  /** Requests per key and per tenant, counted per API function instance (ARBOR_RATE_LIMIT_PER_*). */
  rateLimits?: RateLimits;
  /** The chat settings' secret (ARBOR_CHAT_SECRET_ARN); absent: no chat channels on this stack. */
  chat?: { secretId: string; ttlMs: number };
}

/**
 * A deployed function's settings (ARBOR_MODE=aws): the stack's resources, each one missing named
 * with where to find it. `set`: the environment as given (AWS_LAMBDA_FUNCTION_NAME: on Lambda).
 */
export function awsConfig(
  e: Env,
  set: Readonly<Record<string, string | undefined>>,
  model: ModelConfig | undefined,
): AwsConfig {
  const missing = (
    [
      ["AWS_REGION", e.AWS_REGION, "the region Arbor is deployed in, e.g. eu-west-1"],
      [
        "ARBOR_RESOURCES_BUCKET",
        e.ARBOR_RESOURCES_BUCKET,
        "the resources bucket (stack output ResourcesBucketName)",
      ],
      ["ARBOR_TABLE_NAME", e.ARBOR_TABLE_NAME, "the state table (stack output StateTableName)"],
      ["ARBOR_EVENT_BUS_NAME", e.ARBOR_EVENT_BUS_NAME, "the event bus (stack output EventBusName)"],
      [
        "ARBOR_POLICIES_BUCKET",
        (e.ARBOR_POLICY_ENGINE ?? "opa") === "opa" ? e.ARBOR_POLICIES_BUCKET : "cedar",
        "the policies bucket with the OPA bundle (stack output PoliciesBucketName), or ARBOR_POLICY_ENGINE=cedar",
      ],
    ] as const
  ).filter(([, value]) => value === undefined);
  if (missing.length > 0) {
    throw new ConfigError(
      `ARBOR_MODE=aws needs these settings:\n${missing.map(([k, , why]) => `  ${k}: ${why}`).join("\n")}\n` +
        "Deployed functions get them from the CDK stack; for a shell, copy them from `npx cdk deploy` outputs.",
    );
  }
  // A deployed function's webhooks are https only: the loopback switch is for a developer's machine.
  if (e.ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP && set.AWS_LAMBDA_FUNCTION_NAME !== undefined) {
    throw new ConfigError(
      "ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP is for development on one machine and is refused on Lambda: " +
        "unset it (webhooks from a deployed stack go to https receivers only)",
    );
  }
  if ((e.ARBOR_VECTOR_BUCKET === undefined) !== (e.ARBOR_VECTOR_INDEX === undefined)) {
    throw new ConfigError(
      "ARBOR_VECTOR_BUCKET and ARBOR_VECTOR_INDEX go together: set both (engine stack outputs " +
        `VectorBucketName and VectorIndexName); only ${e.ARBOR_VECTOR_BUCKET ? "ARBOR_VECTOR_BUCKET" : "ARBOR_VECTOR_INDEX"} is set`,
    );
  }
  const endpoints: AwsConfig["endpoints"] = {};
  if (e.ARBOR_S3_ENDPOINT) endpoints.s3 = e.ARBOR_S3_ENDPOINT;
  if (e.ARBOR_DYNAMODB_ENDPOINT) endpoints.dynamodb = e.ARBOR_DYNAMODB_ENDPOINT;
  if (e.ARBOR_EVENTBRIDGE_ENDPOINT) endpoints.eventbridge = e.ARBOR_EVENTBRIDGE_ENDPOINT;
  if (e.ARBOR_S3VECTORS_ENDPOINT) endpoints.s3vectors = e.ARBOR_S3VECTORS_ENDPOINT;
  if (e.ARBOR_BEDROCK_ENDPOINT) endpoints.bedrock = e.ARBOR_BEDROCK_ENDPOINT;
  if (e.ARBOR_SQS_ENDPOINT) endpoints.sqs = e.ARBOR_SQS_ENDPOINT;
  if (e.ARBOR_SECRETSMANAGER_ENDPOINT) endpoints.secretsmanager = e.ARBOR_SECRETSMANAGER_ENDPOINT;
  if (e.ARBOR_LAMBDA_ENDPOINT) endpoints.lambda = e.ARBOR_LAMBDA_ENDPOINT;
  if (e.ARBOR_CHAT_SETTINGS_FILE)
    throw new ConfigError(
      "ARBOR_CHAT_SETTINGS_FILE is for `arbor serve`; on AWS the chat settings are a Secrets Manager " +
        "secret, ARBOR_CHAT_SECRET_ARN (deploy with -c chatSecret=<its ARN or name>): unset it",
    );
  return {
    mode: "aws",
    ...sharedSettings(e, model),
    region: e.AWS_REGION as string,
    resourcesBucket: e.ARBOR_RESOURCES_BUCKET as string,
    resourcesPrefix: e.ARBOR_RESOURCES_PREFIX ?? "",
    tableName: e.ARBOR_TABLE_NAME as string,
    eventBusName: e.ARBOR_EVENT_BUS_NAME as string,
    ...(e.ARBOR_VECTOR_BUCKET && e.ARBOR_VECTOR_INDEX
      ? { vectors: { bucket: e.ARBOR_VECTOR_BUCKET, index: e.ARBOR_VECTOR_INDEX } }
      : {}),
    ...(e.ARBOR_STAGE ? { stage: e.ARBOR_STAGE } : {}),
    endpoints,
    policy:
      (e.ARBOR_POLICY_ENGINE ?? "opa") === "opa"
        ? {
            engine: "opa",
            bucket: e.ARBOR_POLICIES_BUCKET as string,
            prefix: e.ARBOR_POLICIES_PREFIX ?? "",
            recheckMs: e.ARBOR_POLICY_RECHECK_MS,
          }
        : { engine: "cedar" },
    notify: {
      allowLoopbackHttp: e.ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP,
      ...webhookReach(e),
      ...(e.ARBOR_NOTIFY_QUEUE_URL ? { queueUrl: e.ARBOR_NOTIFY_QUEUE_URL } : {}),
    },
    ...(e.ARBOR_COMMAND_QUEUES ? { commandQueues: e.ARBOR_COMMAND_QUEUES } : {}),
    ...(e.ARBOR_TOOL_FUNCTION ? { toolFunction: e.ARBOR_TOOL_FUNCTION } : {}),
    ...(e.ARBOR_CHAT_SECRET_ARN
      ? { chat: { secretId: e.ARBOR_CHAT_SECRET_ARN, ttlMs: e.ARBOR_CHAT_SETTINGS_TTL_MS } }
      : {}),
  };
}
