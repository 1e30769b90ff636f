import type { VectorMatch, VectorQuery } from "../../ports/vector-index.ts";

/**
 * Records held in memory and scored exactly: the small index's whole search. Records are kept per
 * type (a query for assistants never looks at outputs). A query scores every record that passes its
 * filters and keeps the best topK: the higher score first, then the smaller key (as the SQL scans
 * order them).
 *
 * A vector with at most half of its components non-zero (the local embedder's hashed features
 * fill about a sixth of theirs) is kept as those components only, in one list per component (an
 * inverted index): a query adds up, for each of its own non-zero components, that component's
 * list, so it touches only the components the records share with it (about a sixth of a sixth of
 * them for the local embedder's) instead of every component of every record. A record that shares none scores 0, as
 * a full dot product would give it. A dense vector is kept whole and scored whole. Records with the
 * same vector (the same output text, written again) are scored once together.
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
   * The components held (a sparse vector's non-zero ones, a dense one's all; a vector shared by
   * records once), and one per record (its key and metadata): about what they take in memory.
   */
  get components(): number {
    let n = 0;
    for (const rows of this.#byType.values()) n += rows.components;
    return n;
  }

  /**
   * What an exact query costs, in dense records: a dense vector counts 1, a sparse one four times
   * the square of its non-zero share (a query as sparse as the records meets that share of its
   * components, each a scattered add: 0.1 for the local embedder's outputs, about 83 of 512
   * non-zero), at most 1; a vector shared by records once.
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

  /** Whether any record of `type` is held. */
  holds(type: string): boolean {
    return (this.#byType.get(type)?.size ?? 0) > 0;
  }

  delete(key: string): void {
    const type = this.#typeOf.get(key);
    if (type === undefined) return;
    this.#byType.get(type)?.delete(key);
    this.#typeOf.delete(key);
  }

  /** The best matches, and how many records were scored (those of the types asked for). */
  query(query: VectorQuery): { matches: VectorMatch[]; scored: number } {
    const types = query.type === undefined ? [...this.#byType.keys()] : [query.type];
    // A type with no records (no memories, no documents yet) is answered before any arithmetic.
    if (!types.some((type) => this.holds(type))) return { matches: [], scored: 0 };
    const q = unit(query.vector);
    const best = new Best(query.topK);
    let scored = 0;
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

/** One component's list: the groups that have it non-zero (in `rows`), and their values, appended. */
interface Posting {
  rows: Uint32Array;
  values: Float32Array;
  length: number;
}

/** Records whose vectors are the same (bit for bit, once made unit): scored once, for all of them. */
interface Group {
  id: number;
  /** The stored vector's bytes, as the map of groups knows it. */
  content: string;
  /** Its keys, in ascending order (the order ties are ranked in). */
  keys: string[];
  /** Its stored components: the non-zero ones, or all. */
  width: number;
}

/**
 * One type's records. Records with the same vector (a repeated output: the same text gives the
 * same vector) form one group, scored once per query however many records share it; a group's
 * keys are kept sorted, so that its best-ranked keys under a prefix are found by bisection. Sparse
 * vectors are in the component lists (by group), dense ones whole. A group left without records
 * keeps its place in the lists until the empty ones outnumber the others; then the groups are
 * renumbered.
 */
class Rows {
  readonly #records = new Map<string, { group: Group; metadata: string }>();
  readonly #byContent = new Map<string, Group>();
  /** By group id; undefined for an empty group. */
  #groups: (Group | undefined)[] = [];
  /** The groups kept whole (unit vectors), by group id. */
  #dense = new Map<number, Float32Array>();
  /** By component, created at its first non-zero value: group ids and values. */
  readonly #postings: (Posting | undefined)[];
  #emptyGroups = 0;
  /** The live groups' components, and one per record (its key and metadata). */
  #components = 0;
  /** The live groups' work (see #workOf and InMemoryVectors.work). */
  #work = 0;
  /** The scores of one query, by group (reused). */
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

  get size(): number {
    return this.#records.size;
  }

  put(key: string, metadata: string, vector: Float32Array): void {
    const was = this.#records.get(key);
    if (was) this.#leave(key, was.group);
    const stored = sparse(vector);
    const unitVector = stored ? undefined : unit(vector);
    const content = stored
      ? `s${bytes(stored.at)}${bytes(stored.values)}`
      : `d${bytes(unitVector as Float32Array)}`;
    let group = this.#byContent.get(content);
    if (!group) {
      const id = this.#groups.length;
      group = { id, content, keys: [], width: stored ? stored.at.length : vector.length };
      this.#groups.push(group);
      this.#byContent.set(content, group);
      if (stored)
        for (let j = 0; j < stored.at.length; j++)
          append(this.#posting(stored.at[j] as number), id, stored.values[j] as number);
      else this.#dense.set(id, unitVector as Float32Array);
      this.#components += group.width;
      this.#work += this.#workOf(group.width);
    }
    group.keys.splice(lowerBound(group.keys, key), 0, key);
    this.#records.set(key, { group, metadata });
    this.#components++;
    this.#compactIfEmpty();
  }

  delete(key: string): void {
    const was = this.#records.get(key);
    if (!was) return;
    this.#leave(key, was.group);
    this.#records.delete(key);
    this.#compactIfEmpty();
  }

  /** Offers every record under `prefix` to `best`; answers how many records there are. */
  score(q: Float32Array, prefix: string | undefined, type: string, best: Best): number {
    const n = this.#groups.length;
    if (this.#scores.length < n) this.#scores = new Float64Array(Math.max(n, this.#scores.length * 2));
    const scores = this.#scores;
    scores.fill(0, 0, n);
    // Sparse groups: each of the query's non-zero components adds its list, in ascending component
    // order (the order a group's own dot product would add them in).
    for (let d = 0; d < q.length; d++) {
      const x = q[d] as number;
      if (x === 0) continue;
      const p = this.#postings[d];
      if (!p) continue;
      const { rows, values, length } = p;
      for (let i = 0; i < length; i++) {
        const g = rows[i] as number;
        scores[g] = (scores[g] as number) + x * (values[i] as number);
      }
    }
    for (const [g, v] of this.#dense) {
      let s = 0;
      for (let i = 0; i < v.length; i++) s += (q[i] as number) * (v[i] as number);
      scores[g] = s;
    }
    for (let g = 0; g < n; g++) {
      const group = this.#groups[g];
      if (!group) continue;
      const s = scores[g] as number;
      const keys = group.keys;
      // Its keys under the prefix are one run of the sorted keys; with one score, a key the best
      // refuses means every later one is refused too.
      for (let i = prefix === undefined ? 0 : lowerBound(keys, prefix); i < keys.length; i++) {
        const key = keys[i] as string;
        if ((prefix !== undefined && !key.startsWith(prefix)) || !best.takes(s, key)) break;
        best.add(s, key, type, (this.#records.get(key) as { metadata: string }).metadata);
      }
    }
    return this.#records.size;
  }

  /**
   * A group's share of a query's work, times dimension²: a dense one all of it; a sparse one
   * SCATTER times the square of its non-zero share (the list entries a query as sparse as it
   * meets, each an add to a scattered score).
   */
  #workOf(width: number): number {
    const dimension = this.#postings.length;
    return Math.min(dimension * dimension, SCATTER * width * width);
  }

  #posting(d: number): Posting {
    let p = this.#postings[d];
    if (!p) {
      p = { rows: new Uint32Array(8), values: new Float32Array(8), length: 0 };
      this.#postings[d] = p;
    }
    return p;
  }

  /** Takes `key` out of its group; an emptied group leaves the map of contents (its lists keep it). */
  #leave(key: string, group: Group): void {
    group.keys.splice(lowerBound(group.keys, key), 1);
    this.#components--;
    if (group.keys.length > 0) return;
    this.#groups[group.id] = undefined;
    this.#byContent.delete(group.content);
    this.#dense.delete(group.id);
    this.#components -= group.width;
    this.#work -= this.#workOf(group.width);
    this.#emptyGroups++;
  }

  /** Renumbers the groups once the empty ones outnumber them (and are many enough to matter). */
  #compactIfEmpty(): void {
    if (this.#emptyGroups < 1024 || this.#emptyGroups <= this.#groups.length - this.#emptyGroups) return;
    const renumbered = new Int32Array(this.#groups.length).fill(-1);
    const groups: Group[] = [];
    for (const group of this.#groups) {
      if (!group) continue;
      renumbered[group.id] = groups.length;
      group.id = groups.length;
      groups.push(group);
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
    for (const [g, v] of this.#dense) dense.set(renumbered[g] as number, v);
    this.#dense = dense;
    this.#groups = groups;
    this.#emptyGroups = 0;
  }
}

/**
 * What a list entry's add costs against a dense multiply-add (measured: 85,000 varied sparse
 * records, 100 of 512 non-zero, cost 25-30 ms a query, where the square of their share alone
 * would predict a tenth of a dense scan's 125 ms).
 */
const SCATTER = 4;

/** The first position in sorted `keys` whose key is not below `key`. */
function lowerBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((keys[mid] as string) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A typed array's bytes as a string (one character a byte): a map key for a vector's contents. */
function bytes(a: Uint16Array | Float32Array): string {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString("latin1");
}

/** Appends (group, value) to a list, doubling its arrays when full. */
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
