import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { OpenAIEmbedder } from "../adapters/embeddings/openai-embedder.ts";
import { BedrockLlm, bedrockClientConfig } from "../adapters/llm/bedrock-llm.ts";
import { OpenAiCompatibleLlm } from "../adapters/llm/openai-compatible-llm.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { Llm } from "../ports/llm.ts";
import type { ModelConfig } from "./config.ts";

/** The configured model (Bedrock or an OpenAI-compatible endpoint). */
export function createModel(config: ModelConfig): Llm {
  if (config.provider === "bedrock") {
    const client = new BedrockRuntimeClient({
      ...bedrockClientConfig,
      region: config.region,
      ...(config.endpoint ? { endpoint: config.endpoint } : {}),
    });
    return new BedrockLlm({ client, model: config.model });
  }
  return new OpenAiCompatibleLlm({
    baseUrl: config.baseUrl,
    model: config.model,
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
  });
}

/**
 * What election embeds with: the model server's embedding model when one is configured
 * (ARBOR_EMBEDDING_MODEL with ARBOR_MODEL_PROVIDER=openai), else the offline embedder (undefined).
 */
export function createEmbedder(config: ModelConfig | undefined): Embedder | undefined {
  if (config?.provider !== "openai" || !config.embedding) return undefined;
  return new OpenAIEmbedder({
    baseUrl: config.baseUrl,
    model: config.embedding.model,
    dimension: config.embedding.dimension,
    ...(config.apiKey ? { apiKey: config.apiKey } : {}),
  });
}
