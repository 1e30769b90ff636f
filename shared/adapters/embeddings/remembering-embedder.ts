import type { Embedder } from "../../ports/embeddings.ts";

/**
 * An embedder that remembers the vectors of the texts it embedded last, and answers those again
 * without asking the one it wraps: a task's description is embedded to elect its assistant and
 * again for its leaf's context; the same request text comes back. Bounded (`max` texts, the least
 * recently asked for go first); a text longer than `maxChars` is not kept. Vectors are the same for
 * the same text (every embedder is deterministic per id), so the answer is the one the wrapped
 * embedder would give. Its id and dimension are the wrapped one's.
 */
export class RememberingEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  readonly #inner: Embedder;
  readonly #known = new Map<string, Float32Array>();
  readonly #max: number;
  readonly #maxChars: number;

  constructor(inner: Embedder, options: { max?: number; maxChars?: number } = {}) {
    this.#inner = inner;
    this.id = inner.id;
    this.dimension = inner.dimension;
    this.#max = options.max ?? 2_048;
    this.#maxChars = options.maxChars ?? 8_192;
  }

  /** How many texts it holds. */
  get size(): number {
    return this.#known.size;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const out = new Array<Float32Array>(texts.length);
    const missing: number[] = [];
    texts.forEach((text, i) => {
      const known = this.#known.get(text);
      if (!known) {
        missing.push(i);
        return;
      }
      // Asked for again: the most recent now.
      this.#known.delete(text);
      this.#known.set(text, known);
      out[i] = known;
    });
    if (missing.length === 0) return out;
    const vectors = await this.#inner.embed(missing.map((i) => texts[i] as string));
    missing.forEach((i, k) => {
      const text = texts[i] as string;
      const vector = vectors[k] as Float32Array;
      out[i] = vector;
      if (text.length > this.#maxChars || !vector) return;
      this.#known.set(text, vector);
      if (this.#known.size > this.#max) this.#known.delete(this.#known.keys().next().value as string);
    });
    return out;
  }
}
