import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { BedrockLlm, bedrockClientConfig } from "../adapters/llm/bedrock-llm.ts";
import { OpenAiCompatibleLlm } from "../adapters/llm/openai-compatible-llm.ts";
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
