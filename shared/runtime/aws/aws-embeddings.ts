import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { S3VectorsClient } from "@aws-sdk/client-s3vectors";
import { TitanEmbedder } from "../../adapters/embeddings/titan-embedder.ts";
import { bedrockClientConfig } from "../../adapters/llm/bedrock-llm.ts";
import { S3VectorsIndex } from "../../adapters/vectors/s3-vectors-index.ts";
import { ConfigError } from "../../kernel/errors.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { VectorIndex } from "../../ports/vector-index.ts";
import type { AwsConfig } from "../config.ts";

/**
 * Titan v2 at its largest size. The engine stack creates the vector index with this dimension and
 * tags it with the embedder id, so changing it means a new index (the adapter refuses a mismatch).
 */
export const AWS_EMBEDDING_DIMENSION = 1024;

/**
 * The embedder and the vector index on AWS (Titan Text Embeddings v2, S3 Vectors): what the engine
 * elects and gathers context with, and what the tool function's search built-ins read.
 */
export async function openAwsEmbeddings(
  config: AwsConfig,
  clients: { embeddings?: BedrockRuntimeClient; s3vectors?: S3VectorsClient },
  given?: Embedder,
): Promise<{ embedder: Embedder; index: VectorIndex }> {
  if (!config.vectors) {
    throw new ConfigError(
      "The engine needs its vector index: set ARBOR_VECTOR_BUCKET and ARBOR_VECTOR_INDEX " +
        "(engine stack outputs VectorBucketName and VectorIndexName)",
    );
  }
  const at = (endpoint: string | undefined) => ({ region: config.region, ...(endpoint ? { endpoint } : {}) });
  const embedder =
    given ??
    new TitanEmbedder({
      // The embedder retries on its own schedule; the SDK's retries would multiply them.
      client:
        clients.embeddings ??
        new BedrockRuntimeClient({ ...bedrockClientConfig, ...at(config.endpoints.bedrock) }),
      dimension: AWS_EMBEDDING_DIMENSION,
    });
  const index = await S3VectorsIndex.open({
    client: clients.s3vectors ?? new S3VectorsClient(at(config.endpoints.s3vectors)),
    vectorBucketName: config.vectors.bucket,
    indexName: config.vectors.index,
    space: { embedderId: embedder.id, dimension: embedder.dimension },
    // The stack creates the index (tagged with its space); functions may not create indexes.
    createIfMissing: false,
  });
  return { embedder, index };
}
