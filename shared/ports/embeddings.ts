/**
 * Embedding port: text to vectors. Every embedder has an id and a dimension; vectors of different
 * embedders are never compared (the vector index refuses to mix them).
 * Adapters: Bedrock Titan Text Embeddings v2, OpenAI-compatible /v1/embeddings, a local embedder
 * that needs no network and no model download.
 */
export interface Embedder {
  /** Stable id of the model and its settings, e.g. "bedrock:amazon.titan-embed-text-v2:0@512". */
  readonly id: string;
  readonly dimension: number;
  /** One unit-length vector per text, in order. */
  embed(texts: readonly string[]): Promise<Float32Array[]>;
}
