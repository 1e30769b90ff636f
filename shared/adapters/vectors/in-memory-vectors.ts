import type { VectorMatch, VectorQuery } from "../../ports/vector-index.ts";

/**
 * Records held in memory and scored exactly: the small index's whole search. Records are kept per
 * type (a query for assistants never looks at outputs). A query scores every record that passes its
 * filters and keeps the best topK: the higher score first, then the smaller key (as the SQL scans
 * order them).
 *
 * A vector with few non-zero components (the local embedder's hashed features fill about a tenth
 * of theirs, up to half of them) is kept as those components only, in one list per component (an inverted index): a
 * query adds up, for each of its own non-zero components, that component's list, so it touches
 * only the records' components it shares (about a tenth of a tenth of them for the local
 * embedder's) instead of every component of every record. A record that shares none scores 0, as
 * a full dot product would give it. A dense vector is kept whole and scored whole.
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

  /**
   * The components held (a sparse record's non-zero ones, a dense record's all): about what the
   * records take in memory (8 bytes each when sparse, 4 when dense).
   */
  get components(): number {
    let n = 0;
    for (const rows of this.#byType.values()) n += rows.components;
    return n;
  }

  /**
   * What an exact query costs, in dense records: a dense record counts 1, a sparse one the square
   * of its non-zero share (a query as sparse as the records meets that share of its components:
   * 0.03 for the local embedder's outputs, about 83 of 512 non-zero).
   */
  get work(): number {
    let n = 0;
    for (const rows of this.#byType.values()) n += rows.work;
    return n / (this.dimension * this.dimension);
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

  /** The best matches, and how many records were scored (those of the types asked for). */
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

/** One component's list: the rows that have it non-zero, and their values, appended. */
interface Posting {
  rows: Uint32Array;
  values: Float32Array;
  length: number;
}

/**
 * One type's records, by row number (rows are appended; a replaced or deleted record's row is
 * left dead until dead rows outnumber live ones, then the rows are renumbered): keys and metadata
 * by row, sparse vectors in the component lists, dense ones whole.
 */
class Rows {
  readonly #row = new Map<string, number>();
  /** By row; undefined for a dead row. */
  #keys: (string | undefined)[] = [];
  #metadata: (string | undefined)[] = [];
  /** The rows kept whole (unit vectors). */
  #dense = new Map<number, Float32Array>();
  /** By component, created at its first non-zero value. */
  readonly #postings: (Posting | undefined)[];
  #dead = 0;
  /** Live components: a sparse row's non-zero ones, a dense row's all. */
  #components = 0;
  /** The sum of the live rows' squared widths (see InMemoryVectors.work). */
  #work = 0;
  /** Each row's component count (to keep the counts above). */
  #widths: number[] = [];
  /** The scores of one query, by row (reused). */
  #scores = new Float64Array(0);

  constructor(dimension: number) {
    this.#postings = new Array<Posting | undefined>(dimension).fill(undefined);
  }

  get components(): number {
    return this.#components;
  }

  get work(): number {
    return this.#work;
  }

  put(key: string, metadata: string, vector: Float32Array): void {
    const was = this.#row.get(key);
    if (was !== undefined) this.#kill(was);
    const row = this.#keys.length;
    this.#row.set(key, row);
    this.#keys.push(key);
    this.#metadata.push(metadata);
    const stored = sparse(vector);
    if (stored) {
      for (let j = 0; j < stored.at.length; j++)
        append(this.#posting(stored.at[j] as number), row, stored.values[j] as number);
      this.#widths.push(stored.at.length);
      this.#components += stored.at.length;
      this.#work += stored.at.length ** 2;
    } else {
      this.#dense.set(row, unit(vector));
      this.#widths.push(vector.length);
      this.#components += vector.length;
      this.#work += vector.length ** 2;
    }
    this.#compactIfDead();
  }

  delete(key: string): void {
    const row = this.#row.get(key);
    if (row === undefined) return;
    this.#kill(row);
    this.#compactIfDead();
  }

  /** Offers every live row under `prefix` to `best`; answers how many rows were scored. */
  score(q: Float32Array, prefix: string | undefined, type: string, best: Best): number {
    const n = this.#keys.length;
    if (this.#scores.length < n) this.#scores = new Float64Array(Math.max(n, this.#scores.length * 2));
    const scores = this.#scores;
    scores.fill(0, 0, n);
    // Sparse rows: each of the query's non-zero components adds its list, in ascending component
    // order (the order a row's own dot product would add them in).
    for (let d = 0; d < q.length; d++) {
      const x = q[d] as number;
      if (x === 0) continue;
      const p = this.#postings[d];
      if (!p) continue;
      const { rows, values, length } = p;
      for (let i = 0; i < length; i++) {
        const row = rows[i] as number;
        scores[row] = (scores[row] as number) + x * (values[i] as number);
      }
    }
    for (const [row, v] of this.#dense) {
      let s = 0;
      for (let i = 0; i < v.length; i++) s += (q[i] as number) * (v[i] as number);
      scores[row] = s;
    }
    const keys = this.#keys;
    for (let row = 0; row < n; row++) {
      const key = keys[row];
      if (key === undefined) continue;
      const s = scores[row] as number;
      // The prefix is looked at only for a row good enough to be kept.
      if (best.takes(s, key) && (prefix === undefined || key.startsWith(prefix)))
        best.add(s, key, type, this.#metadata[row] as string);
    }
    return n - this.#dead;
  }

  #posting(d: number): Posting {
    let p = this.#postings[d];
    if (!p) {
      p = { rows: new Uint32Array(8), values: new Float32Array(8), length: 0 };
      this.#postings[d] = p;
    }
    return p;
  }

  #kill(row: number): void {
    this.#row.delete(this.#keys[row] as string);
    this.#keys[row] = undefined;
    this.#metadata[row] = undefined;
    this.#dense.delete(row);
    this.#dead++;
    const width = this.#widths[row] as number;
    this.#components -= width;
    this.#work -= width ** 2;
  }

  /** Renumbers the live rows once the dead outnumber them (and their lists are long enough to matter). */
  #compactIfDead(): void {
    if (this.#dead < 1024 || this.#dead <= this.#keys.length - this.#dead) return;
    const renumbered = new Int32Array(this.#keys.length).fill(-1);
    const keys: string[] = [];
    const metadata: string[] = [];
    const widths: number[] = [];
    for (let row = 0; row < this.#keys.length; row++) {
      const key = this.#keys[row];
      if (key === undefined) continue;
      renumbered[row] = keys.length;
      this.#row.set(key, keys.length);
      keys.push(key);
      metadata.push(this.#metadata[row] as string);
      widths.push(this.#widths[row] as number);
    }
    for (const p of this.#postings) {
      if (!p) continue;
      let k = 0;
      for (let i = 0; i < p.length; i++) {
        const to = renumbered[p.rows[i] as number] as number;
        if (to < 0) continue;
        p.rows[k] = to;
        p.values[k++] = p.values[i] as number;
      }
      p.length = k;
    }
    const dense = new Map<number, Float32Array>();
    for (const [row, v] of this.#dense) dense.set(renumbered[row] as number, v);
    this.#dense = dense;
    this.#keys = keys;
    this.#metadata = metadata;
    this.#widths = widths;
    this.#dead = 0;
  }
}

/** Appends (row, value) to a list, doubling its arrays when full. */
function append(p: Posting, row: number, value: number): void {
  if (p.length === p.rows.length) {
    const rows = new Uint32Array(p.rows.length * 2);
    rows.set(p.rows);
    const values = new Float32Array(p.values.length * 2);
    values.set(p.values);
    p.rows = rows;
    p.values = values;
  }
  p.rows[p.length] = row;
  p.values[p.length++] = value;
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

/**
 * `v` as a unit vector's non-zero components, when they are at most half of it (else undefined):
 * up to there its list entries (a row number and a value, 8 bytes) take no more memory than the
 * whole vector (4 bytes a component), and a query adds up only the components it shares.
 */
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
  if (n > v.length / 2) return undefined;
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
