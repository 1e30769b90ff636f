import { appendFile, mkdir, readFile, rename, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as z from "zod";
import { ConfigError, UnavailableError } from "../../kernel/errors.ts";
import type {
  EmbeddingSpace,
  VectorIndex,
  VectorMatch,
  VectorQuery,
  VectorRecord,
} from "../../ports/vector-index.ts";
import { assertValidSpace, checkQuery, checkRecords, sameSpace, spaceMismatch } from "./vector-checks.ts";

/**
 * A flat, exact vector index held in memory and persisted to a folder as a log:
 *   - `index.json`: the header (format, version, the EmbeddingSpace), written once;
 *   - `vectors.log`: one JSON line per change, appended: `{"put":{key,type,metadata},"v":<base64
 *     little-endian float32>}` or `{"del":[keys]}`.
 * A write appends its lines (fsynced when durable) and only then changes memory, so a query never
 * sees what is not stored. Writes that arrive while one is being appended go out together in the
 * next append. A crash can only tear the last line: opening drops a torn last line. When the log
 * holds much more than the live records (replaced or deleted ones), it is rewritten compactly
 * (temporary file, fsync, rename).
 *
 * Queries compute the exact cosine similarity against every record of the type under the key
 * prefix (O(n · dimension)): right for the local mode's thousands of records, not for millions.
 * Sparse vectors (the local embedder's) are held as their non-zero values only, so that they cost
 * O(n · non-zeros). One process owns a folder at a time.
 */
const HEADER = "index.json";
const LOG = "vectors.log";
const FORMAT = "arbor-vector-index";

const MetadataValue = z.union([z.string(), z.number(), z.boolean()]);
const HeaderSchema = z.object({
  format: z.literal(FORMAT),
  version: z.literal(2),
  space: z.object({ embedderId: z.string().min(1), dimension: z.number().int().min(1) }),
});
const LineSchema = z.union([
  z.object({
    put: z.object({ key: z.string(), type: z.string(), metadata: z.record(z.string(), MetadataValue) }),
    v: z.string(),
  }),
  z.object({ del: z.array(z.string()) }),
]);
type Line = z.infer<typeof LineSchema>;

/**
 * A stored vector: all its values (`indices` undefined), or only its non-zero values at the
 * ascending positions `indices` when they are few (see `storedVector`).
 */
interface StoredVector {
  values: Float32Array;
  indices: Uint16Array | undefined;
}

interface Slot extends StoredVector {
  key: string;
  type: string;
  metadata: Record<string, string | number | boolean>;
  norm: number;
}

interface Pending {
  lines: string[];
  apply: (() => void)[];
  settle: { resolve: () => void; reject: (e: unknown) => void }[];
}

export interface LocalVectorIndexOptions {
  /** fsync every append (default true). */
  durable?: boolean;
}

export class LocalVectorIndex implements VectorIndex {
  readonly space: EmbeddingSpace;
  readonly #dir: string;
  readonly #durable: boolean;
  /**
   * Records by type (queries filter by type: electing an assistant never scans the outputs), each
   * list sorted by key, so that the keys under a prefix (a tenant's) are one run, found by bisection
   * (an upsert then moves the later slots of its list: cheap for thousands of records).
   */
  readonly #byType = new Map<string, Slot[]>();
  readonly #byKey = new Map<string, Slot>();
  /** Lines in the log file, live or not: compaction compares it with the live records. */
  #logLines: number;
  #pending: Pending | undefined;
  #writing: Promise<void> | undefined;

  private constructor(dir: string, space: EmbeddingSpace, durable: boolean, logLines: number) {
    this.#dir = dir;
    this.space = { embedderId: space.embedderId, dimension: space.dimension };
    this.#durable = durable;
    this.#logLines = logLines;
  }

  /**
   * Opens the index in folder `dir` (created when missing). Refuses, with a ConfigError naming both
   * spaces, a folder written for another embedding space.
   */
  static async open(
    dir: string,
    space: EmbeddingSpace,
    options: LocalVectorIndexOptions = {},
  ): Promise<LocalVectorIndex> {
    assertValidSpace(space);
    const durable = options.durable ?? true;
    let raw: string;
    try {
      raw = await readFile(join(dir, HEADER), "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
        throw new UnavailableError(`Cannot read vector index ${dir}`, { cause: e });
      }
      await mkdir(dir, { recursive: true, mode: 0o700 }); // only the owner reads the data
      await writeFile(join(dir, LOG), "", { flush: durable, mode: 0o600 });
      const header = { format: FORMAT, version: 2, space: { ...space } };
      await atomicWrite(join(dir, HEADER), JSON.stringify(header), durable);
      return new LocalVectorIndex(dir, space, durable, 0);
    }
    const parsed = HeaderSchema.safeParse(safeJson(raw));
    if (!parsed.success) {
      throw new ConfigError(
        `${join(dir, HEADER)} is not an Arbor vector index header (or is corrupt, or from an older ` +
          "version): move the folder away and Arbor starts a new index",
        { cause: parsed.error },
      );
    }
    if (!sameSpace(parsed.data.space, space)) throw spaceMismatch(`at ${dir}`, parsed.data.space, space);
    const index = new LocalVectorIndex(dir, space, durable, 0);
    await index.#load();
    return index;
  }

  /** Number of records. */
  get size(): number {
    return this.#byKey.size;
  }

  /** Every record, its vector whole (to move the index elsewhere). */
  *records(): Generator<VectorRecord> {
    for (const s of this.#byKey.values())
      yield {
        key: s.key,
        type: s.type,
        metadata: { ...s.metadata },
        vector: denseVector(s, this.space.dimension).slice(),
      };
  }

  async upsert(records: readonly VectorRecord[]): Promise<void> {
    checkRecords(records, this.space.dimension);
    if (records.length === 0) return;
    const slots = records.map(
      (r): Slot => ({
        key: r.key,
        type: r.type,
        metadata: { ...(r.metadata ?? {}) },
        ...storedVector(r.vector.slice()),
        norm: Math.sqrt(r.vector.reduce((s, v) => s + v * v, 0)),
      }),
    );
    return this.#enqueue(
      slots.map((s) => putLine(s, this.space.dimension)),
      () => {
        for (const s of slots) this.#put(s);
      },
    );
  }

  async delete(keys: readonly string[]): Promise<void> {
    // A key may also be on its way in (an upsert still being appended): then it must go too.
    const doomed =
      this.#pending || this.#writing ? [...new Set(keys)] : keys.filter((k) => this.#byKey.has(k));
    if (doomed.length === 0) return;
    return this.#enqueue([JSON.stringify({ del: doomed } satisfies Line)], () => {
      for (const k of doomed) this.#remove(k);
    });
  }

  mayHold(type: string): boolean {
    return (this.#byType.get(type)?.length ?? 0) > 0;
  }

  async query(query: VectorQuery): Promise<VectorMatch[]> {
    const qNorm = Math.sqrt(checkQuery(query, this.space.dimension));
    const q = query.vector;
    const { keyPrefix } = query;
    const best = new TopK(query.topK);
    const lists = query.type === undefined ? this.#byType.values() : [this.#byType.get(query.type) ?? []];
    for (const list of lists) {
      const from = keyPrefix === undefined ? 0 : bisect(list, 0, (s) => s.key >= keyPrefix);
      const to =
        keyPrefix === undefined ? list.length : bisect(list, from, (s) => !s.key.startsWith(keyPrefix));
      for (let i = from; i < to; i++) {
        const s = list[i] as Slot;
        const dot = s.indices === undefined ? denseDot(q, s.values) : sparseDot(q, s.indices, s.values);
        best.offer(s, dot / (qNorm * s.norm));
      }
    }
    return best.ranked().map(({ slot, score }) => ({
      key: slot.key,
      score,
      type: slot.type,
      metadata: { ...slot.metadata },
    }));
  }

  #put(slot: Slot): void {
    this.#remove(slot.key);
    const list = this.#byType.get(slot.type) ?? [];
    this.#byType.set(slot.type, list);
    const at = bisect(list, 0, (s) => s.key >= slot.key);
    list.splice(at, 0, slot);
    this.#byKey.set(slot.key, slot);
  }

  #remove(key: string): void {
    const slot = this.#byKey.get(key);
    if (!slot) return;
    this.#byKey.delete(key);
    const list = this.#byType.get(slot.type) as Slot[];
    const at = bisect(list, 0, (s) => s.key >= key);
    list.splice(at, 1);
  }

  /** Queues lines for the next append; `apply` changes memory once they are stored. */
  #enqueue(lines: string[], apply: () => void): Promise<void> {
    const pending = this.#pending ?? { lines: [], apply: [], settle: [] };
    this.#pending = pending;
    pending.lines.push(...lines);
    pending.apply.push(apply);
    const done = new Promise<void>((resolve, reject) => pending.settle.push({ resolve, reject }));
    this.#writing ??= this.#drain();
    return done;
  }

  async #drain(): Promise<void> {
    try {
      for (let batch = this.#pending; batch; batch = this.#pending) {
        this.#pending = undefined;
        try {
          await appendFile(join(this.#dir, LOG), `${batch.lines.join("\n")}\n`, { flush: this.#durable });
          this.#logLines += batch.lines.length;
          for (const apply of batch.apply) apply();
          if (this.#logLines > 1000 && this.#logLines > 2 * this.#byKey.size) await this.#compact();
          for (const s of batch.settle) s.resolve();
        } catch (cause) {
          const e = new UnavailableError(`Cannot write vector index ${this.#dir}`, { cause });
          for (const s of batch.settle) s.reject(e);
        }
      }
    } finally {
      this.#writing = undefined;
    }
  }

  /** Rewrites the log with only the live records. */
  async #compact(): Promise<void> {
    const lines = [...this.#byKey.values()].map((s) => putLine(s, this.space.dimension));
    await atomicWrite(join(this.#dir, LOG), lines.length ? `${lines.join("\n")}\n` : "", this.#durable);
    this.#logLines = lines.length;
  }

  async #load(): Promise<void> {
    const path = join(this.#dir, LOG);
    const text = await readFile(path, "utf8").catch((e: unknown) => {
      throw new ConfigError(`Vector index ${this.#dir}: ${LOG} is missing`, { cause: e });
    });
    const end = text.lastIndexOf("\n") + 1;
    if (end < text.length) await truncate(path, Buffer.byteLength(text.slice(0, end))); // a torn last line
    const lines = text.slice(0, end).split("\n").slice(0, -1);
    const { dimension } = this.space;
    for (const [i, raw] of lines.entries()) {
      const line = LineSchema.safeParse(safeJson(raw));
      if (!line.success)
        throw new ConfigError(`Vector index ${this.#dir}: line ${i + 1} of ${LOG} is corrupt`, {
          cause: line.error,
        });
      // Only #byKey while reading: the lists are sorted once at the end, not insertion by insertion.
      if ("del" in line.data) {
        for (const k of line.data.del) this.#byKey.delete(k);
        continue;
      }
      const bytes = Buffer.from(line.data.v, "base64");
      if (bytes.length !== dimension * 4)
        throw new ConfigError(
          `Vector index ${this.#dir}: line ${i + 1} of ${LOG} holds ${bytes.length} bytes of vector, expected ${dimension * 4}`,
        );
      const vector = new Float32Array(dimension);
      let norm = 0;
      for (let d = 0; d < dimension; d++) {
        const v = bytes.readFloatLE(d * 4);
        vector[d] = v;
        norm += v * v;
      }
      this.#byKey.set(line.data.put.key, {
        ...line.data.put,
        ...storedVector(vector),
        norm: Math.sqrt(norm),
      });
    }
    for (const slot of this.#byKey.values()) {
      const list = this.#byType.get(slot.type) ?? [];
      this.#byType.set(slot.type, list);
      list.push(slot);
    }
    for (const list of this.#byType.values()) list.sort((a, b) => (a.key < b.key ? -1 : 1));
    this.#logLines = lines.length;
  }
}

/** A record as its log line. */
const putLine = (s: Slot, dimension: number): string =>
  JSON.stringify({
    put: { key: s.key, type: s.type, metadata: s.metadata },
    v: Buffer.from(littleEndian(denseVector(s, dimension))).toString("base64"),
  } satisfies Line);

/** The first index from `from` where `past` holds, `past` being false then true along `list`. */
function bisect(list: readonly Slot[], from: number, past: (s: Slot) => boolean): number {
  let lo = from;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (past(list[mid] as Slot)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Below this share of non-zero values a vector is held sparse: 6 bytes per non-zero (index and
 * value) instead of 4 per dimension, and a dot product that skips the zeros. The local embedder's
 * vectors hold 30-200 non-zeros out of 512; Titan's are dense.
 */
const SPARSE_MAX_SHARE = 0.5;

/** How the index holds `vector` (which it may keep: callers pass a copy of what they do not own). */
function storedVector(vector: Float32Array): StoredVector {
  let nonZeros = 0;
  for (const v of vector) if (v !== 0) nonZeros++;
  if (nonZeros > vector.length * SPARSE_MAX_SHARE) return { values: vector, indices: undefined };
  const indices = new Uint16Array(nonZeros); // dimensions are at most 4096
  const values = new Float32Array(nonZeros);
  let n = 0;
  for (let d = 0; d < vector.length; d++) {
    if (vector[d] === 0) continue;
    indices[n] = d;
    values[n++] = vector[d] as number;
  }
  return { values, indices };
}

/** The vector back with all its `dimension` values (the log stores them all). */
function denseVector(v: StoredVector, dimension: number): Float32Array {
  if (v.indices === undefined) return v.values;
  const dense = new Float32Array(dimension);
  for (let i = 0; i < v.indices.length; i++) dense[v.indices[i] as number] = v.values[i] as number;
  return dense;
}

function denseDot(q: Float32Array, values: Float32Array): number {
  let dot = 0;
  for (let d = 0; d < q.length; d++) dot += (q[d] as number) * (values[d] as number);
  return dot;
}

/**
 * The same sum as `denseDot` over the whole vector, bit for bit: the skipped terms are ±0 (the
 * query is finite), adding ±0 changes no sum, and the others are added in the same order.
 */
function sparseDot(q: Float32Array, indices: Uint16Array, values: Float32Array): number {
  let dot = 0;
  for (let i = 0; i < indices.length; i++) dot += (q[indices[i] as number] as number) * (values[i] as number);
  return dot;
}

interface Scored {
  slot: Slot;
  score: number;
}

/** Whether (score, key) ranks before `other`: the higher score first, then the smaller key. */
const ranksBefore = (score: number, key: string, other: Scored): boolean =>
  score > other.score || (score === other.score && key < other.slot.key);

/**
 * The best `k` candidates offered, in a binary heap whose root is the worst of them: most
 * candidates cost one comparison with the root and no allocation, none costs more than O(log k)
 * (rather than an object per candidate and a sort of them all).
 */
class TopK {
  readonly #k: number;
  readonly #heap: Scored[] = [];

  constructor(k: number) {
    this.#k = k;
  }

  offer(slot: Slot, score: number): void {
    const heap = this.#heap;
    if (heap.length < this.#k) {
      heap.push({ slot, score });
      // Sift up: the newcomer climbs while it ranks after its parent.
      for (let i = heap.length - 1; i > 0; ) {
        const parent = (i - 1) >> 1;
        if (!this.#worse(i, parent)) break;
        this.#swap(i, parent);
        i = parent;
      }
    } else if (ranksBefore(score, slot.key, heap[0] as Scored)) {
      heap[0] = { slot, score };
      // Sift down: the newcomer sinks while a child ranks after it.
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        let worst = i;
        if (left < heap.length && this.#worse(left, worst)) worst = left;
        if (left + 1 < heap.length && this.#worse(left + 1, worst)) worst = left + 1;
        if (worst === i) break;
        this.#swap(i, worst);
        i = worst;
      }
    }
  }

  /** The candidates kept, best first. */
  ranked(): Scored[] {
    return this.#heap.sort((a, b) => b.score - a.score || (a.slot.key < b.slot.key ? -1 : 1));
  }

  /** Whether heap[i] ranks after heap[j]. */
  #worse(i: number, j: number): boolean {
    const other = this.#heap[j] as Scored;
    return ranksBefore(other.score, other.slot.key, this.#heap[i] as Scored);
  }

  #swap(i: number, j: number): void {
    const heap = this.#heap;
    [heap[i], heap[j]] = [heap[j] as Scored, heap[i] as Scored];
  }
}

/** The vector's bytes as little-endian float32 (a copy only on a big-endian machine). */
function littleEndian(vector: Float32Array): Uint8Array {
  const bytes = new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] === 1) return bytes;
  const copy = Buffer.alloc(vector.byteLength);
  vector.forEach((v, d) => {
    copy.writeFloatLE(v, d * 4);
  });
  return copy;
}

async function atomicWrite(path: string, data: string, durable: boolean): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, data, { flush: durable, mode: 0o600 });
  await rename(tmp, path);
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
