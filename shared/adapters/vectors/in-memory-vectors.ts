import type { VectorMatch, VectorQuery } from "../../ports/vector-index.ts";

/**
 * Records held in memory and scored exactly: the small index's whole search. Records are kept per
 * type (a query for assistants never looks at outputs). A query scores every record that passes its filters (one dot product each) and
 * keeps the best topK: the higher score first, then the smaller key (as the SQL scans order them).
 */
export class InMemoryVectors {
  readonly dimension: number;
  readonly #byType = new Map<string, Rows>();
  /** The type each key is stored under. */
  readonly #typeOf = new Map<string, string>();

  constructor(dimension: number) {
    this.dimension = dimension;
  }

  get size(): number {
    return this.#typeOf.size;
  }

  put(key: string, type: string, metadata: string, vector: Float32Array): void {
    const was = this.#typeOf.get(key);
    if (was !== undefined && was !== type) this.#byType.get(was)?.delete(key);
    let rows = this.#byType.get(type);
    if (!rows) {
      rows = new Rows();
      this.#byType.set(type, rows);
    }
    rows.put(key, metadata, vector);
    this.#typeOf.set(key, type);
  }

  delete(key: string): void {
    const type = this.#typeOf.get(key);
    if (type === undefined) return;
    this.#byType.get(type)?.delete(key);
    this.#typeOf.delete(key);
  }

  /** The best matches, and how many records were scored. */
  query(query: VectorQuery): { matches: VectorMatch[]; scored: number } {
    const q = unit(query.vector);
    const best = new Best(query.topK);
    let scored = 0;
    const types = query.type === undefined ? [...this.#byType.keys()] : [query.type];
    for (const type of types) scored += this.#byType.get(type)?.score(q, query.keyPrefix, type, best) ?? 0;
    return {
      scored,
      matches: best.entries.map((e) => ({
        key: e.key,
        score: Math.min(1, e.score),
        type: e.type,
        metadata: JSON.parse(e.metadata) as VectorMatch["metadata"],
      })),
    };
  }
}

/**
 * One type's records: keys, metadata and unit vectors by row (a deletion moves the last row into the
 * hole). A vector with few non-zero components (the local embedder's hashed features fill about a
 * tenth of theirs) is kept as those components only, and scored over them.
 */
class Rows {
  readonly #row = new Map<string, number>();
  #keys: string[] = [];
  #metadata: string[] = [];
  #vectors: (Float32Array | Sparse)[] = [];

  put(key: string, metadata: string, vector: Float32Array): void {
    const stored = sparse(vector) ?? unit(vector);
    const row = this.#row.get(key);
    if (row === undefined) {
      this.#row.set(key, this.#keys.length);
      this.#keys.push(key);
      this.#metadata.push(metadata);
      this.#vectors.push(stored);
    } else {
      this.#metadata[row] = metadata;
      this.#vectors[row] = stored;
    }
  }

  delete(key: string): void {
    const row = this.#row.get(key);
    if (row === undefined) return;
    const last = this.#keys.length - 1;
    if (row !== last) {
      const moved = this.#keys[last] as string;
      this.#keys[row] = moved;
      this.#metadata[row] = this.#metadata[last] as string;
      this.#vectors[row] = this.#vectors[last] as Float32Array | Sparse;
      this.#row.set(moved, row);
    }
    this.#keys.pop();
    this.#metadata.pop();
    this.#vectors.pop();
    this.#row.delete(key);
  }

  /** Offers every row under `prefix` to `best`; answers how many were scored. */
  score(q: Float32Array, prefix: string | undefined, type: string, best: Best): number {
    const keys = this.#keys;
    let scored = 0;
    for (let row = 0; row < keys.length; row++) {
      const key = keys[row] as string;
      if (prefix !== undefined && !key.startsWith(prefix)) continue;
      scored++;
      const v = this.#vectors[row] as Float32Array | Sparse;
      let s = 0;
      if (v instanceof Float32Array)
        for (let i = 0; i < v.length; i++) s += (q[i] as number) * (v[i] as number);
      else {
        const { at, values } = v;
        for (let j = 0; j < at.length; j++) s += (q[at[j] as number] as number) * (values[j] as number);
      }
      if (best.takes(s, key)) best.add(s, key, type, this.#metadata[row] as string);
    }
    return scored;
  }
}

/** A unit vector's non-zero components: where they are, and their values. */
interface Sparse {
  at: Uint16Array;
  values: Float32Array;
}

interface Entry {
  score: number;
  key: string;
  type: string;
  metadata: string;
}

/** The best `k` entries seen, best first. */
class Best {
  readonly entries: Entry[] = [];
  readonly #k: number;

  constructor(k: number) {
    this.#k = k;
  }

  takes(score: number, key: string): boolean {
    const worst = this.entries.length === this.#k ? this.entries[this.#k - 1] : undefined;
    return worst === undefined || before(score, key, worst);
  }

  add(score: number, key: string, type: string, metadata: string): void {
    let at = this.entries.length;
    while (at > 0 && before(score, key, this.entries[at - 1] as Entry)) at--;
    this.entries.splice(at, 0, { score, key, type, metadata });
    if (this.entries.length > this.#k) this.entries.pop();
  }
}

/** Whether (score, key) ranks before `other`: the higher score, then the smaller key. */
const before = (score: number, key: string, other: Entry): boolean =>
  score > other.score || (score === other.score && key < other.key);

/** `v` as a unit vector's non-zero components, when they are at most a quarter of it (else undefined). */
function sparse(v: Float32Array): Sparse | undefined {
  if (v.length > 65_536) return undefined;
  let n = 0;
  let norm = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i] as number;
    if (x !== 0) {
      n++;
      norm += x * x;
    }
  }
  if (n > v.length / 4) return undefined;
  const scale = 1 / Math.sqrt(norm);
  const at = new Uint16Array(n);
  const values = new Float32Array(n);
  let k = 0;
  for (let i = 0; i < v.length; i++)
    if (v[i] !== 0) {
      at[k] = i;
      values[k++] = (v[i] as number) * scale;
    }
  return { at, values };
}

/** `v` scaled to length 1 (the caller refused zero vectors). */
function unit(v: Float32Array): Float32Array {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += (v[i] as number) * (v[i] as number);
  const s = 1 / Math.sqrt(n);
  const out = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = (v[i] as number) * s;
  return out;
}
