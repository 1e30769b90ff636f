import type { VectorMatch, VectorQuery } from "../../ports/vector-index.ts";

interface Entry {
  key: string;
  type: string;
  /** The metadata as stored (JSON), parsed only for the matches a query returns. */
  metadata: string;
  /** The vector scaled to length 1: a dot product of two is their cosine. */
  unit: Float32Array;
}

/**
 * Records held in memory and scored exactly: the small index's whole search. A query scores every
 * record that passes its filters (one dot product of the dimension each) and keeps the best topK,
 * the higher score first, then the smaller key (as the SQL scans order them).
 */
export class InMemoryVectors {
  readonly dimension: number;
  readonly #entries = new Map<string, Entry>();

  constructor(dimension: number) {
    this.dimension = dimension;
  }

  get size(): number {
    return this.#entries.size;
  }

  put(key: string, type: string, metadata: string, vector: Float32Array): void {
    this.#entries.set(key, { key, type, metadata, unit: unit(vector) });
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }

  /** The best matches, and how many records were scored. */
  query(query: VectorQuery): { matches: VectorMatch[]; scored: number } {
    const q = unit(query.vector);
    const { type, keyPrefix, topK } = query;
    const best: { entry: Entry; score: number }[] = [];
    let scored = 0;
    for (const entry of this.#entries.values()) {
      if (type !== undefined && entry.type !== type) continue;
      if (keyPrefix !== undefined && !entry.key.startsWith(keyPrefix)) continue;
      scored++;
      const score = dot(q, entry.unit);
      if (
        best.length === topK &&
        !before(score, entry.key, best[topK - 1] as { entry: Entry; score: number })
      )
        continue;
      let at = best.length;
      while (at > 0 && before(score, entry.key, best[at - 1] as { entry: Entry; score: number })) at--;
      best.splice(at, 0, { entry, score });
      if (best.length > topK) best.pop();
    }
    return {
      scored,
      matches: best.map(({ entry, score }) => ({
        key: entry.key,
        score: Math.min(1, score),
        type: entry.type,
        metadata: JSON.parse(entry.metadata) as VectorMatch["metadata"],
      })),
    };
  }
}

/** Whether (score, key) ranks before `other`: the higher score, then the smaller key. */
const before = (score: number, key: string, other: { entry: Entry; score: number }): boolean =>
  score > other.score || (score === other.score && key < other.entry.key);

function unit(v: Float32Array): Float32Array {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += (v[i] as number) * (v[i] as number);
  const s = 1 / Math.sqrt(n);
  const out = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = (v[i] as number) * s;
  return out;
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}
