import { resolve } from "node:path";
import * as z from "zod";
import type { RateLimit, RateLimits } from "../../channels/http/rate-limit.ts";
import { DEFAULT_BEDROCK_MODEL, endOfLife, type PriceOverrides } from "../../domain/model-catalogue.ts";
import { QUEUED_STEPS, type QueuedStep } from "../../engine/routes.ts";
import { ConfigError } from "../../kernel/errors.ts";
import {
  allowEntryProblem,
  DEFAULT_MAX_RESPONSE_BYTES,
  type OutboundSettings,
  portEntryProblem,
} from "../../outbound/policy.ts";

/**
 * The environment's schema (every setting of both modes, parsed with zod) and what both modes make
 * of it: the model, rate limits, webhooks' reach, the outbound guard. config.ts reads the
 * environment once and hands the result to config/local.ts or config/aws.ts.
 */
export const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
export const name = z.string().regex(/^[a-zA-Z0-9._-]+$/);
/** A comma-separated list whose every entry `problem` accepts (it says why not). */
const list = (problem: (entry: string) => string | undefined) =>
  z
    .string()
    .transform((v) =>
      v
        .split(",")
        .map((e) => e.trim())
        .filter(Boolean),
    )
    .superRefine((entries, ctx) => {
      for (const e of entries) {
        const why = problem(e);
        if (why) ctx.addIssue({ code: "custom", message: why });
      }
    });

/** US dollars per million tokens: what ARBOR_MODEL_PRICES sets per model id. */
const PriceOverridesSchema = z.record(
  z.string().min(1).max(200),
  z.strictObject({
    input: z.number().min(0).max(10_000),
    output: z.number().min(0).max(10_000),
    cacheRead: z.number().min(0).max(10_000).optional(),
    cacheWrite: z.number().min(0).max(10_000).optional(),
  }),
);

const rateLimit = (fallback: string) =>
  z
    .string()
    .regex(
      /^(off|0|\d+(\.\d+)?(,\d+)?)$/,
      'requests per second and an optional burst, e.g. "20" or "20,200"; "off" for no limit',
    )
    .default(fallback)
    .transform((v): RateLimit | undefined => {
      if (v === "off" || v === "0") return undefined;
      const [rate, burst] = v.split(",").map(Number) as [number, number | undefined];
      if (rate <= 0) return undefined;
      return { perSecond: rate, burst: Math.max(1, burst ?? Math.ceil(rate * 10)) };
    });

/** An absolute http(s) base URL (parsePublicUrl), without a trailing slash. */
/**
 * A setting given as JSON text: parsed, then checked by `check` (which adds its issues to `ctx`);
 * unset or blank is undefined; text that is not JSON is refused with `example`.
 */
function jsonSetting<T>(example: string, check: (parsed: unknown, ctx: z.RefinementCtx) => T) {
  return z
    .string()
    .optional()
    .transform((text, ctx): T | undefined => {
      if (text === undefined || text.trim() === "") return undefined;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        ctx.addIssue({ code: "custom", message: `not JSON; e.g. ${example}` });
        return z.NEVER;
      }
      return check(parsed, ctx);
    });
}

/** A schema's issues as the setting's, each with its path. */
function issuesOf(error: z.ZodError, ctx: z.RefinementCtx): never {
  for (const issue of error.issues)
    ctx.addIssue({ code: "custom", message: `${issue.path.join(".") || "(top)"}: ${issue.message}` });
  return z.NEVER;
}

export const publicUrl = z.string().transform((v, ctx) => {
  try {
    return parsePublicUrl(v);
  } catch (e) {
    ctx.addIssue({ code: "custom", message: (e as Error).message });
    return z.NEVER;
  }
});

export const EnvSchema = z.object({
  ARBOR_MODE: z.enum(["local", "aws"]).default("local"),
  ARBOR_TENANT: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "letters, digits, _ and -")
    .default("local"),
  // local mode
  ARBOR_DATA_DIR: z.string().min(1).default(".arbor"),
  ARBOR_DURABLE: bool.default(true),
  ARBOR_OBJECT_STORE: z.enum(["sqlite", "files"]).default("sqlite"),
  /** A JSON file with the tool registry (see shared/tools/service/config.ts); default: the built-in tools. */
  ARBOR_TOOLS_FILE: z.string().min(1).optional(),
  /**
   * A team file (shared/domain/team.ts): the team a tenant without assistants gets before its first
   * request (`-c team=<file>` at deploy bundles it); default: the built-in DEFAULT_TEAM.
   */
  ARBOR_TEAM_FILE: z.string().min(1).optional(),
  /** The API keys `arbor serve` accepts (see shared/adapters/local/api-keys.ts); default <dataDir>/api-keys.json. */
  ARBOR_API_KEYS_FILE: z.string().min(1).optional(),
  /**
   * Where callers reach `arbor serve` from outside (the A2A agent card names it): an absolute
   * http(s) URL, optionally with a path prefix; default the address it listens on.
   */
  ARBOR_PUBLIC_URL: publicUrl.optional(),
  /**
   * Which policy engine decides: Cedar (the default policy, built in; the local default) or OPA (a
   * bundle, see policies/README.md; the AWS default).
   */
  ARBOR_POLICY_ENGINE: z.enum(["cedar", "opa"]).optional(),
  /** opa, aws mode: the policies bucket (storage stack output PoliciesBucketName) and a key prefix. */
  ARBOR_POLICIES_BUCKET: name.optional(),
  ARBOR_POLICIES_PREFIX: z.string().optional(),
  /** opa, aws mode: how often a function looks for a newly published bundle (HeadObject). */
  ARBOR_POLICY_RECHECK_MS: z.coerce
    .number()
    .int("whole milliseconds")
    .min(10_000, "at least 10000 (ten seconds), e.g. 300000 (five minutes)")
    .default(300_000),
  /** opa, local mode: the folder with bundle.tar.gz and bundle.tar.gz.sha256. */
  ARBOR_POLICIES_DIR: z.string().min(1).optional(),
  // aws mode
  AWS_REGION: z.string().min(1).optional(),
  /** The deployment's stage (the engine stack sets it): the `stage` dimension of the metrics. */
  ARBOR_STAGE: name.optional(),
  ARBOR_RESOURCES_BUCKET: name.optional(),
  ARBOR_RESOURCES_PREFIX: z.string().optional(),
  ARBOR_TABLE_NAME: name.optional(),
  ARBOR_EVENT_BUS_NAME: z.string().min(1).optional(),
  /** The S3 Vectors bucket and index the engine keeps its embeddings in (both or neither). */
  ARBOR_VECTOR_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/, "3-63 lower-case letters, digits and hyphens")
    .optional(),
  ARBOR_VECTOR_INDEX: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, "3-63 lower-case letters, digits, dots and hyphens")
    .optional(),
  /**
   * The tool function (functions/tool.ts, engine stack output ToolFunctionName): a name or ARN. Set,
   * the engine calls its tools through it (shared/tools/service/tool-function-port.ts); unset, they run
   * in process.
   */
  ARBOR_TOOL_FUNCTION: z
    .string()
    .regex(
      /^(?:arn:aws[a-z-]*:lambda:[a-z]{2,}(?:-[a-z]+)+-\d{1,2}:\d{12}:function:)?[a-zA-Z0-9_-]{1,64}(?::(?:\$LATEST|[a-zA-Z0-9_-]{1,128}))?$/,
      "a Lambda function name (arbor-prod-engine-ToolFunction...) or its ARN: the engine stack's output ToolFunctionName",
    )
    .optional(),
  /**
   * How many requests `arbor serve` takes from one API key, and from all keys of one tenant:
   * "<per second>" or "<per second>,<burst>" (burst default: ten seconds' worth), or "off".
   */
  ARBOR_RATE_LIMIT_PER_KEY: rateLimit("20,200"),
  ARBOR_RATE_LIMIT_PER_TENANT: rateLimit("50,500"),
  /**
   * How long a blocking A2A SendMessage waits for the request to end before it answers with the
   * task still working (the caller then polls GetTask); below API Gateway's 30 s on AWS.
   */
  ARBOR_A2A_BLOCKING_WAIT_MS: z.coerce
    .number()
    .int("whole milliseconds")
    .min(0)
    .max(3_600_000, "at most 3600000 (an hour); behind API Gateway keep it under 30000, e.g. 25000")
    .optional(),
  /** The watchdog re-drives work that has not moved for this long; longer than any step may run. */
  /** Which resource writes go on the bus as RESOURCE_PUT (store/resource-events.ts). */
  ARBOR_RESOURCE_EVENTS: z.enum(["default", "all", "off"]).default("default"),
  ARBOR_WATCHDOG_STALE_MS: z.coerce
    .number()
    .int("whole milliseconds")
    .min(60_000, "at least 60000 (a minute); keep it above the longest step timeout, e.g. 600000")
    .default(600_000),
  /**
   * The outbound guard (shared/outbound/): every URL Arbor calls out to. Addresses and names it may
   * reach although they are not public (CIDRs, addresses, host names, comma-separated), ports
   * besides 80 and 443, https only, and the longest response body it reads.
   */
  ARBOR_OUTBOUND_ALLOW: list(allowEntryProblem).optional(),
  ARBOR_OUTBOUND_PORTS: list(portEntryProblem).optional(),
  ARBOR_OUTBOUND_HTTPS_ONLY: bool.default(false),
  ARBOR_OUTBOUND_MAX_RESPONSE_BYTES: z.coerce
    .number()
    .int("whole bytes")
    .min(1024, "at least 1024 bytes")
    .default(DEFAULT_MAX_RESPONSE_BYTES),
  /**
   * Webhook deliveries (shared/notify/): https only; plain http (and https) to a loopback receiver
   * on any port only when this is on, for development.
   */
  ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: bool.default(false),
  /**
   * Webhook and push URLs' own allow-list and ports (the same forms as ARBOR_OUTBOUND_ALLOW and
   * ARBOR_OUTBOUND_PORTS, which are the tools' and never open webhooks): a tenant's callbackUrl
   * reaches a non-public address only when it is named here.
   */
  ARBOR_WEBHOOK_ALLOW: list(allowEntryProblem).optional(),
  ARBOR_WEBHOOK_PORTS: list(portEntryProblem).optional(),
  /** AWS: the notify function's delivery queue (SQS), where recorded deliveries are queued (the stack sets it). */
  ARBOR_NOTIFY_QUEUE_URL: z.url().optional(),
  /**
   * AWS: the engine's command queues by step, as JSON (the stack sets it): {"plan": "<queue URL>",
   * "ready": ..., "turn": ..., "resume": ..., "activity": ...}. A command with a queue is sent to
   * it (SQS) instead of the event bus (shared/adapters/aws/sqs-command-queues.ts); unset: every
   * command goes on the bus and a rule per step delivers it.
   */
  ARBOR_COMMAND_QUEUES: jsonSetting(
    '{"plan": "https://sqs.eu-west-1.amazonaws.com/123456789012/arbor-dev-plan"}',
    (parsed, ctx) => {
      const unknown = Object.keys(parsed ?? {}).filter(
        (k) => !(QUEUED_STEPS as readonly string[]).includes(k),
      );
      if (unknown.length > 0) {
        ctx.addIssue({
          code: "custom",
          message: `${unknown.join(", ")}: no step started by a command (${QUEUED_STEPS.join(", ")})`,
        });
        return z.NEVER;
      }
      const queues = z.partialRecord(z.enum(QUEUED_STEPS), z.url()).safeParse(parsed);
      if (queues.success) return queues.data as Partial<Record<QueuedStep, string>>;
      return issuesOf(queues.error, ctx);
    },
  ),
  /**
   * A leaf's context window in tokens (its model request and the answer together; see
   * shared/engine/window/window.ts): at least the model's smallest window you use, e.g. 32000; an
   * assistant's limits.contextTokens overrides it.
   */
  ARBOR_CONTEXT_TOKENS: z.coerce
    .number()
    .int("whole tokens")
    .min(2_000, "at least 2000 tokens, e.g. 32000")
    .max(10_000_000, "at most 10000000 tokens, e.g. 200000 for Claude")
    .optional(),
  // the model
  ARBOR_MODEL_PROVIDER: z.enum(["bedrock", "openai"]).optional(),
  /**
   * How long the model may go on failing (unreachable, throttling) before the task waiting on it
   * fails with the reason; until then its step tries again (shared/engine/model-calls.ts). On AWS
   * keep it well under the model steps' 5-minute timeout.
   */
  ARBOR_MODEL_RETRY_MS: z.coerce
    .number()
    .int("whole milliseconds")
    .min(0)
    .max(240_000, "at most 240000 (4 minutes: a model step on AWS ends at 5), e.g. 30000")
    .optional(),
  ARBOR_MODEL: z.string().min(1).optional(),
  /**
   * Leaves of one request running at once; the others wait for a slot (shared/engine/leaf-slots.ts).
   * 0: no bound.
   */
  ARBOR_LEAVES_AT_ONCE: z.coerce
    .number()
    .int("a whole number of leaves")
    .min(0, "0 (no bound) or more")
    .max(10_000, "at most 10000, e.g. 20")
    .optional(),
  /**
   * Leaves of one request running at once while the other requests' leaf steps (starts, next turns)
   * waiting or running number fewer than the room above the bound (shared/engine/leaf-slots.ts).
   * 0: the bound always holds.
   */
  ARBOR_LEAVES_WHEN_IDLE: z.coerce
    .number()
    .int("a whole number of leaves")
    .min(0, "0 (the bound always holds) or more")
    .max(10_000, "at most 10000, e.g. 50")
    .optional(),
  /**
   * Prices per million tokens by model id, over the catalogue's (shared/domain/model-catalogue.ts),
   * as JSON: {"llama3.1": {"input": 0, "output": 0}}. A model in neither has an unknown cost.
   */
  ARBOR_MODEL_PRICES: jsonSetting('{"llama3.1": {"input": 0, "output": 0}}', (parsed, ctx) => {
    const prices = PriceOverridesSchema.safeParse(parsed);
    // JSON has no undefined: an optional price absent is absent, as PriceOverrides has it.
    if (prices.success) return prices.data as PriceOverrides;
    return issuesOf(prices.error, ctx);
  }),
  ARBOR_OPENAI_BASE_URL: z.url().optional(),
  /**
   * Locally, with ARBOR_MODEL_PROVIDER=openai: the model server's embedding model, which election
   * then uses (`POST <ARBOR_OPENAI_BASE_URL>/embeddings`), e.g. nomic-embed-text on Ollama, with its
   * dimension (ARBOR_EMBEDDING_DIMENSION, e.g. 768). Unset: the offline embedder.
   */
  ARBOR_EMBEDDING_MODEL: z.string().min(1).max(200).optional(),
  ARBOR_EMBEDDING_DIMENSION: z.coerce
    .number()
    .int("a whole number of dimensions")
    .min(1)
    .max(16_384, "at most 16384, e.g. 768 for nomic-embed-text or 1536 for text-embedding-3-small")
    .optional(),
  ARBOR_OPENAI_API_KEY: z.string().min(1).optional(),
  ARBOR_BEDROCK_ENDPOINT: z.url().optional(),
  /** Endpoint overrides, for local peers (s3rver, DynamoDB Local) or VPC endpoints. */
  ARBOR_S3_ENDPOINT: z.url().optional(),
  ARBOR_DYNAMODB_ENDPOINT: z.url().optional(),
  ARBOR_EVENTBRIDGE_ENDPOINT: z.url().optional(),
  ARBOR_S3VECTORS_ENDPOINT: z.url().optional(),
  ARBOR_SQS_ENDPOINT: z.url().optional(),
  ARBOR_SECRETSMANAGER_ENDPOINT: z.url().optional(),
  ARBOR_LAMBDA_ENDPOINT: z.url().optional(),
  /**
   * The chat channels' settings (Slack, Teams: shared/notify/chat/settings.ts). Locally a JSON file only
   * its owner may read (default <dataDir>/chat.json, when present); on AWS a Secrets Manager secret
   * (its ARN or name: the engine stack sets it from -c chatSecret). Re-read after the TTL.
   */
  ARBOR_CHAT_SETTINGS_FILE: z.string().min(1).optional(),
  ARBOR_CHAT_SECRET_ARN: z
    .string()
    .regex(
      /^(arn:aws[a-z-]*:secretsmanager:[a-z]{2,}(-[a-z]+)+-\d{1,2}:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}|[A-Za-z0-9/_+=.@-]{1,512})$/,
      "a Secrets Manager secret's ARN (arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>) or name",
    )
    .optional(),
  ARBOR_CHAT_SETTINGS_TTL_MS: z.coerce
    .number()
    .int("whole milliseconds")
    .min(1_000, "at least 1000 (a second), e.g. 300000 (five minutes)")
    .max(3_600_000, "at most 3600000 (an hour): a rotated secret must be taken in time")
    .default(300_000),
});

/** The environment as the schema parsed it. */
export type Env = z.output<typeof EnvSchema>;

export type ModelConfig =
  | { provider: "bedrock"; model: string; region: string; endpoint?: string }
  | {
      provider: "openai";
      model: string;
      baseUrl: string;
      apiKey?: string;
      /** The server's embedding model for election (ARBOR_EMBEDDING_MODEL, _DIMENSION). */
      embedding?: { model: string; dimension: number };
    };

export const MODEL_HELP = `No model is configured. Arbor talks to Amazon Bedrock or to any OpenAI-compatible endpoint:

  Amazon Bedrock (enable the model in the Bedrock console, Model access, first):
    export ARBOR_MODEL_PROVIDER=bedrock AWS_REGION=us-east-1
    export ARBOR_MODEL=${DEFAULT_BEDROCK_MODEL}
    (credentials from the usual AWS chain: AWS_PROFILE, environment, SSO)

  An OpenAI-compatible server (Ollama, vLLM, LM Studio):
    ollama serve & ollama pull llama3.1
    export ARBOR_MODEL_PROVIDER=openai ARBOR_OPENAI_BASE_URL=http://localhost:11434/v1 ARBOR_MODEL=llama3.1

Or try it offline with the scripted example:  npx arbor run --example offsite`;

export interface NotifyConfig {
  /** Loopback receivers (http or https, any port) are allowed: development only (ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP). */
  allowLoopbackHttp: boolean;
  /** Non-public addresses and names webhooks may reach (ARBOR_WEBHOOK_ALLOW); the tools' allow-list never applies. */
  allow?: readonly string[];
  /** Ports besides 443 webhooks may use (ARBOR_WEBHOOK_PORTS). */
  ports?: readonly string[];
  /** AWS: the delivery queue (ARBOR_NOTIFY_QUEUE_URL) the notify function consumes; absent: the sweep finds what is due. */
  queueUrl?: string;
}

export function rateLimitsOf(e: Env): RateLimits {
  return {
    ...(e.ARBOR_RATE_LIMIT_PER_KEY ? { perKey: e.ARBOR_RATE_LIMIT_PER_KEY } : {}),
    ...(e.ARBOR_RATE_LIMIT_PER_TENANT ? { perTenant: e.ARBOR_RATE_LIMIT_PER_TENANT } : {}),
  };
}

export function webhookReach(e: Env): Pick<NotifyConfig, "allow" | "ports"> {
  return {
    ...(e.ARBOR_WEBHOOK_ALLOW ? { allow: e.ARBOR_WEBHOOK_ALLOW } : {}),
    ...(e.ARBOR_WEBHOOK_PORTS ? { ports: e.ARBOR_WEBHOOK_PORTS } : {}),
  };
}

export function outboundSettings(e: Env): OutboundSettings {
  return {
    allow: e.ARBOR_OUTBOUND_ALLOW ?? [],
    ports: e.ARBOR_OUTBOUND_PORTS ?? [],
    httpsOnly: e.ARBOR_OUTBOUND_HTTPS_ONLY,
    maxResponseBytes: e.ARBOR_OUTBOUND_MAX_RESPONSE_BYTES,
  };
}

/**
 * A public base URL (ARBOR_PUBLIC_URL, `arbor serve --public-url`): absolute http(s), no
 * credentials, query or fragment, a path only as a clean prefix (a proxy's /arbor, say). Returns
 * it without a trailing slash; throws ConfigError saying what is wrong.
 */
export function parsePublicUrl(value: string): string {
  // A password in it is not echoed (error output ends up in CI logs and bug reports).
  const shown = value.replace(/\/\/[^/?#]*@/, "//***@");
  const bad = (why: string) =>
    new ConfigError(
      `The public URL ${JSON.stringify(shown)} ${why}: give an absolute http(s) URL such as https://arbor.example.com`,
    );
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad("is not a URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw bad("is not http or https");
  if (url.username || url.password) throw bad("has credentials in it");
  if (url.search || value.includes("?")) throw bad("has a query");
  if (url.hash || value.includes("#")) throw bad("has a fragment");
  const path = url.pathname.replace(/\/+$/, "");
  if (path !== "" && !/^(\/[A-Za-z0-9._~-]+)+$/.test(path))
    throw bad("has a path that is not a plain prefix");
  // The URL parser folds "." and ".." segments and backslashes away: look at what was given.
  if (/\\|\/\.{1,2}(\/|$)/.test(value)) throw bad("has a path that is not a plain prefix");
  return `${url.origin}${path}`;
}

export function modelConfig(e: Env): ModelConfig | undefined {
  if (!e.ARBOR_MODEL_PROVIDER) return undefined;
  const missing = (name: string, why: string) =>
    new ConfigError(`ARBOR_MODEL_PROVIDER=${e.ARBOR_MODEL_PROVIDER} needs ${name}: ${why}`);
  if (!e.ARBOR_MODEL) throw missing("ARBOR_MODEL", `the model id, e.g. ${DEFAULT_BEDROCK_MODEL} or llama3.1`);
  const retired = endOfLife(e.ARBOR_MODEL);
  if (retired) throw new ConfigError(`ARBOR_MODEL=${retired}`);
  if (e.ARBOR_MODEL_PROVIDER === "bedrock") {
    if (e.ARBOR_EMBEDDING_MODEL)
      throw new ConfigError(
        "ARBOR_EMBEDDING_MODEL is for an OpenAI-compatible model server (ARBOR_MODEL_PROVIDER=openai); with Bedrock, election embeds with Titan on AWS and offline locally: unset it",
      );
    if (!e.AWS_REGION) throw missing("AWS_REGION", "the region where the model is enabled, e.g. us-east-1");
    return {
      provider: "bedrock",
      model: e.ARBOR_MODEL,
      region: e.AWS_REGION,
      ...(e.ARBOR_BEDROCK_ENDPOINT ? { endpoint: e.ARBOR_BEDROCK_ENDPOINT } : {}),
    };
  }
  if (!e.ARBOR_OPENAI_BASE_URL)
    throw missing("ARBOR_OPENAI_BASE_URL", "e.g. http://localhost:11434/v1 for Ollama");
  if (e.ARBOR_EMBEDDING_MODEL && e.ARBOR_EMBEDDING_DIMENSION === undefined)
    throw missing(
      "ARBOR_EMBEDDING_DIMENSION",
      `the dimension of ${e.ARBOR_EMBEDDING_MODEL}'s vectors, e.g. 768 for nomic-embed-text`,
    );
  return {
    provider: "openai",
    model: e.ARBOR_MODEL,
    baseUrl: e.ARBOR_OPENAI_BASE_URL,
    ...(e.ARBOR_OPENAI_API_KEY ? { apiKey: e.ARBOR_OPENAI_API_KEY } : {}),
    ...(e.ARBOR_EMBEDDING_MODEL && e.ARBOR_EMBEDDING_DIMENSION !== undefined
      ? { embedding: { model: e.ARBOR_EMBEDDING_MODEL, dimension: e.ARBOR_EMBEDDING_DIMENSION } }
      : {}),
  };
}

/**
 * The settings both modes read the same way: the model, the tenant, the tools and team files, the
 * public URL, the limits, the outbound guard, the webhooks' reach and the watchdog. Each mode adds
 * its own (config/local.ts, config/aws.ts).
 */
export function sharedSettings(e: Env, model: ModelConfig | undefined) {
  return {
    ...(model ? { model } : {}),
    tenant: e.ARBOR_TENANT,
    ...(e.ARBOR_TOOLS_FILE ? { toolsFile: resolve(e.ARBOR_TOOLS_FILE) } : {}),
    ...(e.ARBOR_TEAM_FILE ? { teamFile: resolve(e.ARBOR_TEAM_FILE) } : {}),
    ...(e.ARBOR_PUBLIC_URL ? { publicUrl: e.ARBOR_PUBLIC_URL } : {}),
    rateLimits: rateLimitsOf(e),
    outbound: outboundSettings(e),
    notify: { allowLoopbackHttp: e.ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP, ...webhookReach(e) },
    watchdogStaleMs: e.ARBOR_WATCHDOG_STALE_MS,
    resourceEvents: e.ARBOR_RESOURCE_EVENTS,
    ...(e.ARBOR_A2A_BLOCKING_WAIT_MS !== undefined
      ? { a2aBlockingWaitMs: e.ARBOR_A2A_BLOCKING_WAIT_MS }
      : {}),
    ...(e.ARBOR_CONTEXT_TOKENS !== undefined ? { contextTokens: e.ARBOR_CONTEXT_TOKENS } : {}),
    ...(e.ARBOR_MODEL_RETRY_MS !== undefined ? { modelRetryMs: e.ARBOR_MODEL_RETRY_MS } : {}),
    ...(e.ARBOR_MODEL_PRICES ? { modelPrices: e.ARBOR_MODEL_PRICES } : {}),
    ...(e.ARBOR_LEAVES_AT_ONCE !== undefined ? { leavesAtOnce: e.ARBOR_LEAVES_AT_ONCE } : {}),
    ...(e.ARBOR_LEAVES_WHEN_IDLE !== undefined ? { leavesWhenIdle: e.ARBOR_LEAVES_WHEN_IDLE } : {}),
  };
}
