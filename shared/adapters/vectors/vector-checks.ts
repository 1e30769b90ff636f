import { ConfigError, ValidationError } from "../../kernel/errors.ts";
import type { EmbeddingSpace, VectorQuery, VectorRecord } from "../../ports/vector-index.ts";

/** Checks shared by every VectorIndex adapter, so that all of them refuse the same inputs. */

export const describeSpace = (s: EmbeddingSpace): string => `${s.embedderId} (${s.dimension} dimensions)`;

export const sameSpace = (a: EmbeddingSpace, b: EmbeddingSpace): boolean =>
  a.embedderId === b.embedderId && a.dimension === b.dimension;

export function assertValidSpace(space: EmbeddingSpace): void {
  if (typeof space?.embedderId !== "string" || space.embedderId.trim() === "") {
    throw new ConfigError("An embedding space needs a non-empty embedderId");
  }
  if (!Number.isInteger(space.dimension) || space.dimension < 1 || space.dimension > 4096) {
    throw new ConfigError(
      `Embedding space dimension must be an integer from 1 to 4096, got ${space.dimension}`,
    );
  }
}

/** The error every adapter raises when an index belongs to another embedding space. */
export function spaceMismatch(where: string, stored: EmbeddingSpace, wanted: EmbeddingSpace): ConfigError {
  return new ConfigError(
    `Vector index ${where} belongs to embedding space ${describeSpace(stored)}, but it was opened for ` +
      `${describeSpace(wanted)}. Vectors of different embedders cannot be compared: re-index with the ` +
      "new embedder into another index, or configure the embedder the index was built with.",
  );
}

/** Returns the squared norm; throws ValidationError for a wrong dimension, NaN/Infinity or a zero vector. */
export function checkVector(vector: Float32Array, dimension: number, what: string): number {
  if (!(vector instanceof Float32Array)) throw new ValidationError(`${what} must be a Float32Array`);
  if (vector.length !== dimension) {
    throw new ValidationError(`${what} has ${vector.length} dimensions but the index expects ${dimension}`, [
      `expected dimension ${dimension}, got ${vector.length}`,
    ]);
  }
  let norm = 0;
  for (let i = 0; i < vector.length; i++) {
    const v = vector[i] as number;
    norm += v * v;
  }
  // A NaN or an Infinity anywhere makes the sum one: the components are looked at only then.
  if (!Number.isFinite(norm) && vector.some((v) => !Number.isFinite(v)))
    throw new ValidationError(`${what} contains NaN or Infinity`);
  if (norm === 0) throw new ValidationError(`${what} is a zero vector: cosine similarity is undefined`);
  return norm;
}

const MAX_KEY_LENGTH = 1024;

export function checkRecords(records: readonly VectorRecord[], dimension: number): void {
  const seen = new Set<string>();
  records.forEach((r, i) => {
    const what = `records[${i}] (${JSON.stringify(r.key)})`;
    if (typeof r.key !== "string" || r.key.length === 0 || r.key.length > MAX_KEY_LENGTH) {
      throw new ValidationError(`${what}: key must be 1 to ${MAX_KEY_LENGTH} characters`);
    }
    if (seen.has(r.key)) throw new ValidationError(`${what}: the same key appears twice in one upsert`);
    seen.add(r.key);
    if (typeof r.type !== "string" || r.type.length === 0)
      throw new ValidationError(`${what}: type is required`);
    for (const [k, v] of Object.entries(r.metadata ?? {})) {
      if (
        !["string", "number", "boolean"].includes(typeof v) ||
        (typeof v === "number" && !Number.isFinite(v))
      ) {
        throw new ValidationError(`${what}: metadata.${k} must be a string, a finite number or a boolean`);
      }
    }
    checkVector(r.vector, dimension, what);
  });
}

export function checkQuery(query: VectorQuery, dimension: number, maxTopK = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isInteger(query.topK) || query.topK < 1 || query.topK > maxTopK) {
    throw new ValidationError(`topK must be an integer from 1 to ${maxTopK}, got ${query.topK}`);
  }
  return checkVector(query.vector, dimension, "query vector");
}
