import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { S3Client } from "@aws-sdk/client-s3";
import { S3VectorsClient } from "@aws-sdk/client-s3vectors";
import { TitanEmbedder } from "../adapters/embeddings/titan-embedder.ts";
import { BedrockLlm, bedrockClientConfig } from "../adapters/llm/bedrock-llm.ts";
import { OpaPolicyEngine } from "../adapters/policy/opa-policy-engine.ts";
import { S3VectorsIndex } from "../adapters/vectors/s3-vectors-index.ts";
import { type AwsConfig, MODEL_HELP } from "../config.ts";
import type { Engine } from "../engine/engine.ts";
import { ConfigError } from "../errors.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { Llm } from "../ports/llm.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import { loadToolsConfig } from "../tools/config.ts";
import type { AwsRuntime } from "./aws.ts";
import { defaultPolicy, type EngineOptions, engineOn, openTools } from "./engine-wiring.ts";
import { createModel } from "./models.ts";

/**
 * The orchestration engine on the AWS runtime: the configured model, Titan Text Embeddings v2 on
 * Bedrock, an S3 Vectors index, the built-in tools and ULIDs. Everything is built once per Lambda
 * cold start; clients can be injected so tests point them at local peers.
 */

/**
 * Titan v2 at its largest size. The engine stack creates the vector index with this dimension and
 * tags it with the embedder id, so changing it means a new index (the adapter refuses a mismatch).
 */
export const AWS_EMBEDDING_DIMENSION = 1024;

export interface AwsEngineClients {
  /** For the model, when the provider is Bedrock. */
  bedrock?: BedrockRuntimeClient;
  /** For Titan embeddings (Bedrock runtime too; a separate client so tests can use two fakes). */
  embeddings?: BedrockRuntimeClient;
  s3vectors?: S3VectorsClient;
  /** For the OPA bundle in the policies bucket. */
  s3?: S3Client;
}

export interface AwsEngineOptions extends EngineOptions {
  clients?: AwsEngineClients;
  llm?: Llm;
  embedder?: Embedder;
}

export async function createAwsEngine(
  rt: AwsRuntime,
  config: AwsConfig,
  options: AwsEngineOptions = {},
): Promise<Engine> {
  const clients = options.clients ?? {};
  if (!config.vectors) {
    throw new ConfigError(
      "The engine needs its vector index: set ARBOR_VECTOR_BUCKET and ARBOR_VECTOR_INDEX " +
        "(engine stack outputs VectorBucketName and VectorIndexName)",
    );
  }
  const llm = options.llm ?? modelFor(config, clients.bedrock);
  const embedder =
    options.embedder ??
    new TitanEmbedder({
      // The embedder retries on its own schedule; the SDK's retries would multiply them.
      client:
        clients.embeddings ?? new BedrockRuntimeClient({ ...bedrockClientConfig, ...at(config, "bedrock") }),
      dimension: AWS_EMBEDDING_DIMENSION,
    });
  const index = await S3VectorsIndex.open({
    client: clients.s3vectors ?? new S3VectorsClient(at(config, "s3vectors")),
    vectorBucketName: config.vectors.bucket,
    indexName: config.vectors.index,
    space: { embedderId: embedder.id, dimension: embedder.dimension },
    // The stack creates the index (tagged with its space); functions may not create indexes.
    createIfMissing: false,
  });
  const withTools = {
    toolsConfig: loadToolsConfig(config.toolsFile),
    ...(config.teamFile ? { teamFile: config.teamFile } : {}),
    ...(config.outbound ? { outbound: config.outbound } : {}),
    policy: options.policy ?? (await policyFor(config, clients.s3)),
    ...options,
  };
  const tools = await openTools(rt, { embedder, index }, withTools);
  return engineOn(rt, { llm, embedder, index, tools }, withTools);
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

let opaLoaded: Promise<PolicyEngine> | undefined;
/** The policy of the configuration; an OPA bundle is read and checked once per process (cold start). */
export function policyFor(config: AwsConfig, s3?: S3Client): Promise<PolicyEngine> {
  const policy = config.policy;
  if (policy.engine === "cedar") return Promise.resolve(defaultPolicy());
  const client =
    s3 ?? new S3Client({ ...at(config, "s3"), forcePathStyle: config.endpoints.s3 !== undefined });
  opaLoaded ??= OpaPolicyEngine.fromS3(client, policy.bucket, {
    prefix: policy.prefix,
  }).catch((e: unknown) => {
    opaLoaded = undefined; // try again on the next invocation
    throw e;
  });
  return opaLoaded;
}
