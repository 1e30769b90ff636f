import { ConfigError } from "../kernel/errors.ts";
import { type AwsConfig, awsConfig } from "./config/aws.ts";
import { EnvSchema, modelConfig } from "./config/env.ts";
import { type LocalConfig, localConfig } from "./config/local.ts";

/**
 * The one place that reads the environment, split by mode: the schema and what both modes share
 * (config/env.ts), the local runtime's settings (config/local.ts), a deployed function's
 * (config/aws.ts), and the CLI's against a remote Arbor or a stack (config/operator.ts). Parsed with
 * zod; a bad or missing setting fails at start-up with a message that says which variable to set.
 */
export type { RateLimit, RateLimits } from "../channels/http/rate-limit.ts";
export type { AwsConfig } from "./config/aws.ts";
export { MODEL_HELP, type ModelConfig, type NotifyConfig, parsePublicUrl } from "./config/env.ts";
export type { LocalConfig } from "./config/local.ts";
export {
  type KeysTarget,
  loadKeysTarget,
  loadOperatorSettings,
  loadRemoteConfig,
  type OperatorSettings,
  type RemoteConfig,
} from "./config/operator.ts";

export type Config = LocalConfig | AwsConfig;

export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  // An empty variable (`export X=`) means "not set".
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const parsed = EnvSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Arbor's settings are not valid:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const model = modelConfig(e);
  if (e.ARBOR_MODE === "local") return localConfig(e, model);
  return awsConfig(e, set, model);
}
