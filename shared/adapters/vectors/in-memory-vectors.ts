import type { VectorMatch, VectorQuery } from "../../ports/vector-index.ts";

/**
 * Records held in memory and scored exactly: the small index's whole search. Records are kept per
 * type (a query for assistants never looks at outputs), each type's unit vectors in one contiguous
 * Float32Array. A query scores every record that passes its filters (one dot product each) and
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
      rows = new Rows(this.dimension);
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
 * One type's records: keys, metadata and unit vectors by row, rows packed (a deletion moves the last
 * row into the hole). A vector with few non-zero components (the local embedder's hashed features
 * fill about a tenth of theirs) also keeps where they are, and is scored over those only.
 */
class Rows {
  readonly #d: number;
  readonly #row = new Map<string, number>();
  #keys: string[] = [];
  #metadata: string[] = [];
  #nonZero: (Uint16Array | undefined)[] = [];
  #vectors: Float32Array;

  constructor(dimension: number) {
    this.#d = dimension;
    this.#vectors = new Float32Array(dimension * 16);
  }

  put(key: string, metadata: string, vector: Float32Array): void {
    let row = this.#row.get(key);
    if (row === undefined) {
      row = this.#keys.length;
      if ((row + 1) * this.#d > this.#vectors.length) {
        const grown = new Float32Array(this.#vectors.length * 2);
        grown.set(this.#vectors);
        this.#vectors = grown;
      }
      this.#row.set(key, row);
      this.#keys.push(key);
      this.#metadata.push(metadata);
      this.#nonZero.push(undefined);
    } else this.#metadata[row] = metadata;
    writeUnit(vector, this.#vectors, row * this.#d);
    this.#nonZero[row] = sparse(vector);
  }

  delete(key: string): void {
    const row = this.#row.get(key);
    if (row === undefined) return;
    const last = this.#keys.length - 1;
    if (row !== last) {
      const moved = this.#keys[last] as string;
      this.#keys[row] = moved;
      this.#metadata[row] = this.#metadata[last] as string;
      this.#nonZero[row] = this.#nonZero[last];
      this.#vectors.copyWithin(row * this.#d, last * this.#d, (last + 1) * this.#d);
      this.#row.set(moved, row);
    }
    this.#keys.pop();
    this.#metadata.pop();
    this.#nonZero.pop();
    this.#row.delete(key);
  }

  /** Offers every row under `prefix` to `best`; answers how many were scored. */
  score(q: Float32Array, prefix: string | undefined, type: string, best: Best): number {
    const d = this.#d;
    const v = this.#vectors;
    const keys = this.#keys;
    let scored = 0;
    for (let row = 0; row < keys.length; row++) {
      const key = keys[row] as string;
      if (prefix !== undefined && !key.startsWith(prefix)) continue;
      scored++;
      let s = 0;
      const o = row * d;
      const nz = this.#nonZero[row];
      if (nz)
        for (let j = 0; j < nz.length; j++)
          s += (q[nz[j] as number] as number) * (v[o + (nz[j] as number)] as number);
      else for (let i = 0; i < d; i++) s += (q[i] as number) * (v[o + i] as number);
      if (best.takes(s, key)) best.add(s, key, type, this.#metadata[row] as string);
    }
    return scored;
  }
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

/** Where `v` is not zero, when that is at most a quarter of it (else undefined: scored whole). */
function sparse(v: Float32Array): Uint16Array | undefined {
  if (v.length > 65_536) return undefined;
  let n = 0;
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) n++;
  if (n > v.length / 4) return undefined;
  const at = new Uint16Array(n);
  let k = 0;
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) at[k++] = i;
  return at;
}

function unit(v: Float32Array): Float32Array {
  const out = new Float32Array(v.length);
  writeUnit(v, out, 0);
  return out;
}

/** Writes `v` scaled to length 1 into `into` at `offset` (the caller refused zero vectors). */
function writeUnit(v: Float32Array, into: Float32Array, offset: number): void {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += (v[i] as number) * (v[i] as number);
  const s = 1 / Math.sqrt(n);
  for (let i = 0; i < v.length; i++) into[offset + i] = (v[i] as number) * s;
}
