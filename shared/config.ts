import { resolve } from "node:path";
import { z } from "zod";
import { ConfigError } from "./errors.ts";

/**
 * The one place that reads the environment. Parsed with zod; a bad or missing setting fails at
 * start-up with a message that says which variable to set and how.
 */
const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const name = z.string().regex(/^[a-zA-Z0-9._-]+$/);

const EnvSchema = z.object({
  ARBOR_MODE: z.enum(["local", "aws"]).default("local"),
  ARBOR_TENANT: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "letters, digits, _ and -")
    .default("local"),
  // local mode
  ARBOR_DATA_DIR: z.string().min(1).default(".arbor"),
  ARBOR_DURABLE: bool.default(true),
  // aws mode
  AWS_REGION: z.string().min(1).optional(),
  ARBOR_RESOURCES_BUCKET: name.optional(),
  ARBOR_RESOURCES_PREFIX: z.string().optional(),
  ARBOR_TABLE_NAME: name.optional(),
  ARBOR_EVENT_BUS_NAME: z.string().min(1).optional(),
  /** Endpoint overrides, for local peers (s3rver, DynamoDB Local) or VPC endpoints. */
  ARBOR_S3_ENDPOINT: z.url().optional(),
  ARBOR_DYNAMODB_ENDPOINT: z.url().optional(),
  ARBOR_EVENTBRIDGE_ENDPOINT: z.url().optional(),
});

export interface LocalConfig {
  mode: "local";
  tenant: string;
  dataDir: string;
  durable: boolean;
}

export interface AwsConfig {
  mode: "aws";
  tenant: string;
  region: string;
  resourcesBucket: string;
  resourcesPrefix: string;
  tableName: string;
  eventBusName: string;
  endpoints: { s3?: string; dynamodb?: string; eventbridge?: string };
}

export type Config = LocalConfig | AwsConfig;

export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Arbor's settings are not valid:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  if (e.ARBOR_MODE === "local") {
    return {
      mode: "local",
      tenant: e.ARBOR_TENANT,
      dataDir: resolve(e.ARBOR_DATA_DIR),
      durable: e.ARBOR_DURABLE,
    };
  }
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
    ] as const
  ).filter(([, value]) => value === undefined);
  if (missing.length > 0) {
    throw new ConfigError(
      `ARBOR_MODE=aws needs these settings:\n${missing.map(([k, , why]) => `  ${k}: ${why}`).join("\n")}\n` +
        "Deployed functions get them from the CDK stack; for a shell, copy them from `npx cdk deploy` outputs.",
    );
  }
  const endpoints: AwsConfig["endpoints"] = {};
  if (e.ARBOR_S3_ENDPOINT) endpoints.s3 = e.ARBOR_S3_ENDPOINT;
  if (e.ARBOR_DYNAMODB_ENDPOINT) endpoints.dynamodb = e.ARBOR_DYNAMODB_ENDPOINT;
  if (e.ARBOR_EVENTBRIDGE_ENDPOINT) endpoints.eventbridge = e.ARBOR_EVENTBRIDGE_ENDPOINT;
  return {
    mode: "aws",
    tenant: e.ARBOR_TENANT,
    region: e.AWS_REGION as string,
    resourcesBucket: e.ARBOR_RESOURCES_BUCKET as string,
    resourcesPrefix: e.ARBOR_RESOURCES_PREFIX ?? "",
    tableName: e.ARBOR_TABLE_NAME as string,
    eventBusName: e.ARBOR_EVENT_BUS_NAME as string,
    endpoints,
  };
}
