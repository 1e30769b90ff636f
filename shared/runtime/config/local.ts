import { join, resolve } from "node:path";
import type { RateLimits } from "../../channels/http/rate-limit.ts";
import type { PriceOverrides } from "../../domain/model-catalogue.ts";
import { ConfigError } from "../../kernel/errors.ts";
import type { OutboundSettings } from "../../outbound/policy.ts";
import { type Env, type ModelConfig, type NotifyConfig, sharedSettings } from "./env.ts";

export interface LocalConfig {
  mode: "local";
  model?: ModelConfig;
  tenant: string;
  dataDir: string;
  /** Commits are fsynced before anything that depends on them leaves the process. */
  durable: boolean;
  /** Stricter and slower: no write resolves before its commit is on disk. */
  syncEachWrite?: boolean;
  /** Where resources live: rows of the local database (default) or one file per resource. */
  objectStore?: "sqlite" | "files";
  /** The tool registry's JSON file (ARBOR_TOOLS_FILE); absent: the built-in tools. */
  toolsFile?: string;
  /** The default team's file (ARBOR_TEAM_FILE); absent: DEFAULT_TEAM. */
  teamFile?: string;
  /** The API keys `arbor serve` accepts (ARBOR_API_KEYS_FILE); loadConfig sets <dataDir>/api-keys.json by default. */
  apiKeysFile?: string;
  /** Where callers reach `arbor serve` (ARBOR_PUBLIC_URL, see parsePublicUrl); absent: where it listens. */
  publicUrl?: string;
  /** How many requests `arbor serve` takes per key and per tenant (ARBOR_RATE_LIMIT_PER_KEY / _PER_TENANT). */
  rateLimits?: RateLimits;
  /** Who decides: the built-in Cedar policy, or an OPA bundle from a folder. */
  policy?: { engine: "cedar" } | { engine: "opa"; dir: string };
  /** What the outbound guard lets through (ARBOR_OUTBOUND_*); absent: public addresses, ports 80 and 443. */
  outbound?: OutboundSettings;
  /** `arbor serve`'s watchdog re-drives work that has not moved for this long (ARBOR_WATCHDOG_STALE_MS). */
  watchdogStaleMs?: number;
  /** ARBOR_RESOURCE_EVENTS (store/resource-events.ts): `all` adds a task's transcript, `off` only outputs; absent: `default`. */
  resourceEvents?: "default" | "all" | "off";
  /** Webhook deliveries (ARBOR_NOTIFY_*); absent: https only. */
  notify?: NotifyConfig;
  /** How long a blocking A2A send waits (ARBOR_A2A_BLOCKING_WAIT_MS); absent: the A2A server's default. */
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
  /**
   * The chat settings file (ARBOR_CHAT_SETTINGS_FILE, else <dataDir>/chat.json); `required` when it
   * was named (its absence is then an error, not "no chat channels"). loadConfig always sets it.
   */
  chat?: { file: string; required: boolean; ttlMs: number };
}

/** The local runtime's settings (ARBOR_MODE=local, the default): `arbor serve`, `arbor run`, the tests. */
export function localConfig(e: Env, model: ModelConfig | undefined): LocalConfig {
  if (e.ARBOR_CHAT_SECRET_ARN)
    throw new ConfigError(
      "ARBOR_CHAT_SECRET_ARN is read on AWS only (ARBOR_MODE=aws): locally the chat settings are a " +
        "file only you may read, ARBOR_CHAT_SETTINGS_FILE (default <data folder>/chat.json); unset it",
    );
  return {
    mode: "local",
    ...sharedSettings(e, model),
    dataDir: resolve(e.ARBOR_DATA_DIR),
    durable: e.ARBOR_DURABLE,
    objectStore: e.ARBOR_OBJECT_STORE,
    apiKeysFile: resolve(e.ARBOR_API_KEYS_FILE ?? join(e.ARBOR_DATA_DIR, "api-keys.json")),
    policy: localPolicy(e),
    chat: {
      file: resolve(e.ARBOR_CHAT_SETTINGS_FILE ?? join(e.ARBOR_DATA_DIR, "chat.json")),
      required: e.ARBOR_CHAT_SETTINGS_FILE !== undefined,
      ttlMs: e.ARBOR_CHAT_SETTINGS_TTL_MS,
    },
  };
}

function localPolicy(e: Env): NonNullable<LocalConfig["policy"]> {
  if ((e.ARBOR_POLICY_ENGINE ?? "cedar") === "cedar") return { engine: "cedar" };
  if (!e.ARBOR_POLICIES_DIR)
    throw new ConfigError(
      "ARBOR_POLICY_ENGINE=opa needs ARBOR_POLICIES_DIR: the folder with bundle.tar.gz and bundle.tar.gz.sha256 (see policies/README.md)",
    );
  return { engine: "opa", dir: resolve(e.ARBOR_POLICIES_DIR) };
}
