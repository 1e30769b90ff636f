import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Engine } from "../shared/engine/engine.ts";
import { ConfigError } from "../shared/kernel/errors.ts";
import type { InvocationMetrics } from "../shared/ports/metrics.ts";
import { type AwsClients, type AwsRuntime, createAwsRuntime } from "../shared/runtime/aws/aws.ts";
import { type AwsEngineOptions, createAwsEngine } from "../shared/runtime/aws/aws-engine.ts";
import { withMeteredAudit } from "../shared/runtime/aws/lambda-parts.ts";
import { type Config, loadConfig } from "../shared/runtime/config.ts";
import { startTelemetry } from "../shared/runtime/telemetry.ts";

/**
 * What the engine functions share: the runtime and engine, built on the first invocation of a
 * Lambda instance and reused by the following ones (clients keep their connections warm).
 */
export interface FunctionDeps {
  /** Default: `loadConfig()`, i.e. the environment the engine stack sets. */
  config?: () => Config;
  clients?: AwsClients;
  /** The notify path's delivery queue (ARBOR_NOTIFY_QUEUE_URL): the notify and API functions'. */
  sqs?: SQSClient;
  engine?: AwsEngineOptions;
  /** Counts model calls, tokens and tool calls (the step handler and the watchdog flush them). */
  metrics?: InvocationMetrics;
}

export interface Warm {
  config: Extract<Config, { mode: "aws" }>;
  rt: AwsRuntime;
  engine: Engine;
}

export interface ColdStart {
  get(): Promise<Warm>;
  /** Closes the runtime (tests; a Lambda instance is simply frozen). */
  close(): Promise<void>;
}

/**
 * What a function builds on a Lambda instance's first invocation and keeps for the following ones:
 * `init` runs once; a failed start is not kept, so the next invocation (Lambda's retry) tries
 * again (after a throttled GetIndex, an A2A card that was down). The one memoiser of every function.
 */
export function memoisedStart<T>(
  init: () => Promise<T>,
  close: (warm: T) => Promise<void>,
): { get(): Promise<T>; close(): Promise<void> } {
  let pending: Promise<T> | undefined;
  return {
    get() {
      pending ??= init().catch((error: unknown) => {
        pending = undefined;
        throw error;
      });
      return pending;
    },
    async close() {
      const current = pending;
      pending = undefined;
      const warm = await current?.catch(() => undefined);
      if (warm !== undefined) await close(warm);
    },
  };
}

/** The config of a function, which must be aws mode's (`what`: the function, for the message). */
export function awsConfigOf(
  deps: Pick<FunctionDeps, "config">,
  what: string,
): Extract<Config, { mode: "aws" }> {
  const config = (deps.config ?? loadConfig)();
  if (config.mode !== "aws")
    throw new ConfigError(
      `${what} run${what.endsWith("s") ? "" : "s"} in aws mode: set ARBOR_MODE=aws (the engine stack does) ` +
        "with the storage settings that mode needs",
    );
  return config;
}

/**
 * `prepare` runs once, right after the engine is built (e.g. to subscribe the steps); `build` makes
 * the engine (default: the whole engine; the API function's has no model and no tools).
 */
export function coldStart(
  deps: FunctionDeps,
  prepare: (warm: Warm) => void = () => {},
  build: typeof createAwsEngine = createAwsEngine,
): ColdStart {
  const init = async (): Promise<Warm> => {
    const config = awsConfigOf(deps, "Arbor's Lambda functions");
    const { metrics } = deps;
    // The command queues' client: the one given for the notify queue, unless the clients name one.
    const clients = deps.sqs && !deps.clients?.sqs ? { ...deps.clients, sqs: deps.sqs } : deps.clients;
    const plain = createAwsRuntime(config, clients);
    // Tool calls are counted where their audit records are written; the model's calls in the engine's model.
    const rt = metrics ? withMeteredAudit(plain, metrics) : plain;
    try {
      const engineOptions = metrics ? { ...deps.engine, metrics } : deps.engine;
      const warm = { config, rt, engine: await build(rt, config, engineOptions) };
      prepare(warm);
      return warm;
    } catch (error) {
      await rt.close();
      throw error;
    }
  };
  return memoisedStart(init, (warm) => warm.rt.close());
}

/**
 * Runs one invocation with tracing as the environment configures it (OTEL_EXPORTER_OTLP_ENDPOINT;
 * none: nothing is loaded), and sends its spans before it returns: a Lambda instance is frozen
 * between invocations, and a span left in a buffer would go out, if ever, an invocation late.
 */
export async function traced<T>(run: () => Promise<T>): Promise<T> {
  const telemetry = await startTelemetry("arbor");
  try {
    return await run();
  } finally {
    await telemetry?.flush().catch(() => undefined);
  }
}

/** The part of Lambda's context object the functions read. */
export interface LambdaContext {
  awsRequestId?: string;
  /** How long this invocation may still run before Lambda stops it (its timeout). */
  getRemainingTimeInMillis?(): number;
}
