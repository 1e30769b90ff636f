import * as z from "zod";
import { ConfigError } from "../../kernel/errors.ts";
import { EnvSchema, name, publicUrl } from "./env.ts";

/** A remote Arbor the CLI speaks to over the HTTP API (ARBOR_URL, ARBOR_KEY). */
export interface RemoteConfig {
  /** The base URL, without a trailing slash (a deployed stack's API, or another machine's `arbor serve`). */
  url: string;
  /** The API key sent as `Authorization: Bearer <key>`. */
  key: string;
}

const RemoteEnvSchema = z.object({
  ARBOR_URL: publicUrl.optional(),
  ARBOR_KEY: z
    .string()
    .regex(/^\S{1,500}$/, "an API key (arbor_...), no spaces")
    .optional(),
});

/**
 * The remote Arbor of ARBOR_URL and ARBOR_KEY, or undefined when ARBOR_URL is not set (the CLI then
 * works on the local data folder). ARBOR_URL without ARBOR_KEY is an error that says what to set.
 */
export function loadRemoteConfig(
  env: Readonly<Record<string, string | undefined>> = process.env,
): RemoteConfig | undefined {
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = RemoteEnvSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Arbor's settings are not valid:\n${lines.join("\n")}`);
  }
  const { ARBOR_URL: url, ARBOR_KEY: key } = parsed.data;
  if (!url) return undefined;
  if (!key)
    throw new ConfigError(
      `ARBOR_URL is set (${url}) but ARBOR_KEY is not (ARBOR_URL needs ARBOR_KEY): set ARBOR_KEY to an ` +
        "API key of that Arbor (`arbor keys add` where it runs prints one; managing keys and the team " +
        "needs an admin's, made with --role admin), or unset ARBOR_URL to work on the local data folder",
    );
  return { url, key };
}

/** Which model answers; undefined when none is configured (see MODEL_HELP). */

/**
 * Where `arbor keys` keeps keys: a remote Arbor through its admin routes (ARBOR_URL with an admin
 * key in ARBOR_KEY), the state table of a deployed stack written directly with AWS credentials
 * (ARBOR_MODE=aws with ARBOR_TABLE_NAME: how the first admin key of a fresh stack is made), or
 * else the local keys file (loadConfig's apiKeysFile).
 */
export type KeysTarget =
  | { kind: "remote"; url: string; key: string }
  | { kind: "table"; tableName: string; region: string; endpoint?: string }
  | { kind: "file" };

const KeysTargetSchema = z.object({
  ARBOR_MODE: z.enum(["local", "aws"]).default("local"),
  ARBOR_TABLE_NAME: name.optional(),
  AWS_REGION: z.string().min(1).optional(),
  ARBOR_DYNAMODB_ENDPOINT: z.url().optional(),
});

export function loadKeysTarget(env: Readonly<Record<string, string | undefined>> = process.env): KeysTarget {
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = KeysTargetSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Arbor's settings are not valid:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const remote = loadRemoteConfig(env);
  if (remote) return { kind: "remote", ...remote };
  if (e.ARBOR_MODE === "local") return { kind: "file" };
  const missing = [
    e.ARBOR_TABLE_NAME ? undefined : "ARBOR_TABLE_NAME (the storage stack's output StateTableName)",
    e.AWS_REGION ? undefined : "AWS_REGION (the region of the stack, e.g. eu-west-1)",
  ].filter((m) => m !== undefined);
  if (missing.length > 0)
    throw new ConfigError(
      `arbor keys with ARBOR_MODE=aws writes the state table directly, with your AWS credentials; set:\n  ${missing.join("\n  ")}\n` +
        "or set ARBOR_URL and ARBOR_KEY (an admin key) to go through the deployed API instead",
    );
  return {
    kind: "table",
    tableName: e.ARBOR_TABLE_NAME as string,
    region: e.AWS_REGION as string,
    ...(e.ARBOR_DYNAMODB_ENDPOINT ? { endpoint: e.ARBOR_DYNAMODB_ENDPOINT } : {}),
  };
}

/**
 * What the operator commands (`arbor policy publish`, `arbor dlq redrive`) read: where the
 * deployed stack's pieces are. AWS credentials and the region come from the SDK's default chain
 * (AWS_PROFILE, AWS_REGION, ...); the endpoints point the clients at local peers in tests.
 */
const OperatorEnvSchema = z.object({
  AWS_REGION: z.string().min(1).optional(),
  /** Storage stack output PoliciesBucketName. */
  ARBOR_POLICIES_BUCKET: name.optional(),
  ARBOR_POLICIES_PREFIX: z.string().optional(),
  ARBOR_POLICY_RECHECK_MS: EnvSchema.shape.ARBOR_POLICY_RECHECK_MS,
  /** Storage stack output DeadLetterQueueUrl. */
  ARBOR_DLQ_URL: z.url().optional(),
  /** Storage stack output EventBusName: where the redrive finds each route's function. */
  ARBOR_EVENT_BUS_NAME: z.string().min(1).optional(),
  ARBOR_S3_ENDPOINT: z.url().optional(),
  ARBOR_SQS_ENDPOINT: z.url().optional(),
  ARBOR_LAMBDA_ENDPOINT: z.url().optional(),
  ARBOR_EVENTBRIDGE_ENDPOINT: z.url().optional(),
});

export interface OperatorSettings {
  region?: string;
  policiesBucket?: string;
  policiesPrefix: string;
  policyRecheckMs: number;
  deadLetterQueueUrl?: string;
  eventBusName?: string;
  endpoints: { s3?: string; sqs?: string; lambda?: string; eventbridge?: string };
}

export function loadOperatorSettings(
  env: Readonly<Record<string, string | undefined>> = process.env,
): OperatorSettings {
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = OperatorEnvSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Arbor's settings are not valid:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const endpoints: OperatorSettings["endpoints"] = {};
  if (e.ARBOR_S3_ENDPOINT) endpoints.s3 = e.ARBOR_S3_ENDPOINT;
  if (e.ARBOR_SQS_ENDPOINT) endpoints.sqs = e.ARBOR_SQS_ENDPOINT;
  if (e.ARBOR_LAMBDA_ENDPOINT) endpoints.lambda = e.ARBOR_LAMBDA_ENDPOINT;
  if (e.ARBOR_EVENTBRIDGE_ENDPOINT) endpoints.eventbridge = e.ARBOR_EVENTBRIDGE_ENDPOINT;
  return {
    ...(e.AWS_REGION ? { region: e.AWS_REGION } : {}),
    ...(e.ARBOR_POLICIES_BUCKET ? { policiesBucket: e.ARBOR_POLICIES_BUCKET } : {}),
    policiesPrefix: e.ARBOR_POLICIES_PREFIX ?? "",
    policyRecheckMs: e.ARBOR_POLICY_RECHECK_MS,
    ...(e.ARBOR_DLQ_URL ? { deadLetterQueueUrl: e.ARBOR_DLQ_URL } : {}),
    ...(e.ARBOR_EVENT_BUS_NAME ? { eventBusName: e.ARBOR_EVENT_BUS_NAME } : {}),
    endpoints,
  };
}
