/**
 * Vector index port: nearest neighbours by cosine similarity, filtered by resource type and URN
 * prefix. An index belongs to one embedding space (embedder id + dimension), fixed when it is
 * created; writing or querying with another space is an error.
 * Adapters: Amazon S3 Vectors, libSQL's DiskANN index in a local file, a local flat index persisted
 * to disk.
 */
export interface EmbeddingSpace {
  embedderId: string;
  dimension: number;
}

export interface VectorRecord {
  /** The resource URN. */
  key: string;
  vector: Float32Array;
  /** `meta.type` of the resource, for filtering. */
  type: string;
  /** Free-form metadata returned with matches (kept small: S3 Vectors limits it). */
  metadata?: Record<string, string | number | boolean>;
}

export interface VectorMatch {
  key: string;
  /** Cosine similarity, 1 = same direction. */
  score: number;
  type: string;
  metadata: Record<string, string | number | boolean>;
}

export interface VectorQuery {
  vector: Float32Array;
  topK: number;
  /** Only records of this resource type. */
  type?: string;
  /** Only records whose key starts with this prefix (e.g. a tenant's URN + "/"). */
  keyPrefix?: string;
}

export interface VectorIndex {
  readonly space: EmbeddingSpace;
  /** Insert or replace by key. */
  upsert(records: readonly VectorRecord[]): Promise<void>;
  query(query: VectorQuery): Promise<VectorMatch[]>;
  /**
   * False when the index knows it holds no record of `type` (a local index has its records at
   * hand): a query of that type would find nothing, and a caller may skip it. True when it may
   * hold some. An adapter that cannot tell without a round trip leaves it out.
   */
  mayHold?(type: string): boolean;
  delete(keys: readonly string[]): Promise<void>;
  /** Lets go of files or connections the adapter holds open (writing what it queued first). */
  close?(): Promise<void>;
}
