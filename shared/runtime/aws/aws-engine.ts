import type { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { LambdaClient } from "@aws-sdk/client-lambda";
import { S3Client } from "@aws-sdk/client-s3";
import type { S3VectorsClient } from "@aws-sdk/client-s3vectors";
import { lambdaToolFunction } from "../../adapters/aws/tool-function-invoke.ts";
import { BedrockLlm } from "../../adapters/llm/bedrock-llm.ts";
import { type PolicyLog, PublishedPolicy } from "../../adapters/policy/published-policy.ts";
import { meteredLlm } from "../../adapters/shared/metered.ts";
import type { Engine } from "../../engine/engine.ts";
import { ConfigError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { Llm } from "../../ports/llm.ts";
import type { Metrics } from "../../ports/metrics.ts";
import type { PolicyEngine } from "../../ports/policy.ts";
import type { ToolPort } from "../../ports/tools.ts";
import { LAMBDA_FUNCTION, loadToolsConfig } from "../../tools/service/config.ts";
import { ToolFunctionPort } from "../../tools/service/tool-function-port.ts";
import { type AwsConfig, MODEL_HELP } from "../config.ts";
import {
  configuredSettings,
  defaultPolicy,
  type EngineOptions,
  engineOn,
  openTools,
} from "../engine-wiring.ts";
import { createModel } from "../models.ts";
import type { AwsRuntime } from "./aws.ts";
import { openAwsEmbeddings } from "./aws-embeddings.ts";

/**
 * The orchestration engine on the AWS runtime: the configured model, Titan Text Embeddings v2 on
 * Bedrock, an S3 Vectors index, the tools (through the tool function when ARBOR_TOOL_FUNCTION names
 * one, else the registry's, in process) and ULIDs. Everything is built once per Lambda
 * cold start; clients can be injected so tests point them at local peers.
 */

export { AWS_EMBEDDING_DIMENSION } from "./aws-embeddings.ts";

export interface AwsEngineClients {
  /** For the model, when the provider is Bedrock. */
  bedrock?: BedrockRuntimeClient;
  /** For Titan embeddings (Bedrock runtime too; a separate client so tests can use two fakes). */
  embeddings?: BedrockRuntimeClient;
  s3vectors?: S3VectorsClient;
  /** For the OPA bundle in the policies bucket. */
  s3?: S3Client;
  /** For the tool function (ARBOR_TOOL_FUNCTION); tests point it at a local Invoke peer. */
  lambda?: LambdaClient;
}

export interface AwsEngineOptions extends EngineOptions {
  clients?: AwsEngineClients;
  llm?: Llm;
  embedder?: Embedder;
  /** Counts the model's calls and tokens (default: nothing counted). */
  metrics?: Metrics;
}

export async function createAwsEngine(
  rt: AwsRuntime,
  config: AwsConfig,
  options: AwsEngineOptions = {},
): Promise<Engine> {
  const clients = options.clients ?? {};
  const model = options.llm ?? modelFor(config, clients.bedrock);
  const llm = options.metrics ? meteredLlm(model, options.metrics) : model;
  const { embedder, index } = await openAwsEmbeddings(config, clients, options.embedder);
  const withTools = {
    toolsConfig: loadToolsConfig(config.toolsFile),
    ...(config.teamFile ? { teamFile: config.teamFile } : {}),
    ...(config.outbound ? { outbound: config.outbound } : {}),
    policy: options.policy ?? (await policyFor(config, clients.s3)),
    ...options,
    // ARBOR_CONTEXT_TOKENS, ARBOR_MODEL_RETRY_MS and ARBOR_MODEL_PRICES, under what the caller sets.
    settings: { ...configuredSettings(config), ...options.settings },
  };
  // With a tool function, every call goes to it: this function opens no tool and holds no grant.
  const tools =
    !options.tools && config.toolFunction
      ? await openToolFunction(rt, config, config.toolFunction, clients.lambda, withTools)
      : await openTools(rt, { embedder, index }, withTools);
  return engineOn(rt, { llm, embedder, index, tools }, withTools);
}

/** The Lambda-backed tool port of the tool function (its ListTools read once, here). */
export function openToolFunction(
  rt: AwsRuntime,
  config: AwsConfig,
  functionName: string,
  client: LambdaClient | undefined,
  options: AwsEngineOptions,
): Promise<ToolPort> {
  return ToolFunctionPort.open(toolFunctionPortOptions(rt, config, functionName, client, options));
}

function toolFunctionPortOptions(
  rt: AwsRuntime,
  config: AwsConfig,
  functionName: string,
  client: LambdaClient | undefined,
  options: AwsEngineOptions,
): Parameters<typeof ToolFunctionPort.open>[0] {
  return {
    toolFunction: lambdaToolFunction({
      // One attempt: only a throttled Invoke, which did not run the function, is tried again.
      client:
        client ??
        new LambdaClient({
          region: LAMBDA_FUNCTION.exec(functionName)?.groups?.region ?? config.region,
          maxAttempts: 1,
          ...(config.endpoints.lambda ? { endpoint: config.endpoints.lambda } : {}),
        }),
      ownsClient: !client,
      functionName,
    }),
    audit: rt.audit,
    clock: options.clock ?? (() => new Date()),
    // The turn step's public URL: an A2A agent that pushes is given a callback under it.
    ...(config.publicUrl ? { publicUrl: config.publicUrl } : {}),
  };
}

/** The same port, asking for the tools in the background (ToolFunctionPort.openInBackground). */
export function openToolFunctionInBackground(
  rt: AwsRuntime,
  config: AwsConfig,
  functionName: string,
  client: LambdaClient | undefined,
  options: AwsEngineOptions,
): ToolPort {
  return ToolFunctionPort.openInBackground(
    toolFunctionPortOptions(rt, config, functionName, client, options),
  );
}

function modelFor(config: AwsConfig, bedrock: BedrockRuntimeClient | undefined): Llm {
  if (!config.model) throw new ConfigError(MODEL_HELP);
  if (config.model.provider === "bedrock" && bedrock)
    return new BedrockLlm({ client: bedrock, model: config.model.model });
  return createModel(config.model);
}

function at(config: AwsConfig, service: "bedrock" | "s3vectors" | "s3") {
  const endpoint = config.endpoints[service];
  return { region: config.region, ...(endpoint ? { endpoint } : {}) };
}

const published = new Map<string, Promise<PolicyEngine>>();
/**
 * The policy of the configuration. OPA: the bundle of the policies bucket, read and checked once
 * per process (cold start) and looked at again every `recheckMs`; while the bucket has no bundle,
 * the built-in default policy decides and the logs say so (published-policy.ts).
 */
export function policyFor(
  config: AwsConfig,
  s3?: S3Client,
  options: { now?: () => number; log?: PolicyLog } = {},
): Promise<PolicyEngine> {
  const policy = config.policy;
  if (policy.engine === "cedar") return Promise.resolve(defaultPolicy());
  const client =
    s3 ?? new S3Client({ ...at(config, "s3"), forcePathStyle: config.endpoints.s3 !== undefined });
  const key = `${policy.bucket}/${policy.prefix}`;
  let loaded = published.get(key);
  if (!loaded) {
    loaded = PublishedPolicy.open({
      client,
      bucket: policy.bucket,
      prefix: policy.prefix,
      recheckMs: policy.recheckMs,
      fallback: defaultPolicy(),
      log: options.log ?? componentLogger("policy"),
      ...(options.now ? { now: options.now } : {}),
    }).catch((e: unknown) => {
      published.delete(key); // try again on the next invocation
      throw e;
    });
    published.set(key, loaded);
  }
  return loaded;
}
