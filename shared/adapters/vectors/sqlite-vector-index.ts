import { dirname } from "node:path";
import Database from "libsql";
import { ConfigError, UnavailableError } from "../../kernel/errors.ts";
import type {
  EmbeddingSpace,
  VectorIndex,
  VectorMatch,
  VectorQuery,
  VectorRecord,
} from "../../ports/vector-index.ts";
import { privateDir, privateFile } from "../local/private-files.ts";
import { InMemoryVectors } from "./in-memory-vectors.ts";
import { assertValidSpace, checkQuery, checkRecords, sameSpace, spaceMismatch } from "./vector-checks.ts";

/**
 * The local vector index: its own SQLite file (libsql), searched exactly while it is small and
 * through libSQL's DiskANN graph (`libsql_vector_idx`, `vector_top_k`) once it is large.
 *
 * Small (up to `graphAbove` records, 10,000 by default): the records are also held in memory
 * (InMemoryVectors), and a query scores every one that passes its filters, exactly, in JavaScript
 * (about a quarter of a microsecond a dense record). A write is one row. A graph costs 1-8 ms of
 * CPU per insertion and 2-4 ms per query whatever the size; below ten thousand dense records the
 * exact scan is cheaper, so no graph is kept. Sparse records (the local embedder's: about 83 of
 * 512 components non-zero) are scored through lists by component, which a query walks only for
 * the components it has: such a record counts for four times the square of its non-zero share
 * of a record (InMemoryVectors.work; about 0.1 for the local embedder's), and records with the
 * same vector count once. So a server that has answered 10,000 of the offsite example's requests
 * (85,000 outputs, 17 distinct texts) keeps scoring them exactly, in well under a millisecond a
 * query, where the graph would take 3.4 ms of the event loop for each output it indexes. Past MAX_EXACT_COMPONENTS held
 * in memory the graph is built whatever the records' count.
 *
 * Large: the graph lives in table `ann` (the same row ids as `vectors`) and is filled behind the
 * writes, a few records per event-loop turn, from the moment the index passes `graphAbove` (the
 * records written before are added the same way, so the event loop is never held for long). Until
 * it has caught up, queries are answered exactly from memory as before; then the copy in memory is
 * let go, and a query counts, through the (type, key) B-tree, up to `exactBelow` records that pass
 * its filters. When that many or fewer do (a small tenant, a conversation, an assistant list), it
 * scores them all, exactly, in SQL. Otherwise it asks the graph for more neighbours than it needs
 * (4 x topK, at least 100) and, while fewer than topK pass the filters and the graph still had more
 * to give, asks again for four times as many, up to `annMax`; past that it scores the filtered
 * range exactly (the filter then keeps a small share of a large index, which the graph cannot find
 * cheaply and the range scan is bounded by).
 *
 * Its own file rather than arbor.db: the index is derived data (a record is written after the
 * resource it describes, and a lost record makes one old result unfindable, nothing worse), and a
 * separate file can be dropped and rebuilt without touching the state. WAL with
 * synchronous=NORMAL: a commit survives the process being killed; a power cut may lose the last
 * commits, which only makes those results unfindable. Writes that arrive in one event-loop turn
 * are written in one transaction. One process owns the file at a time (the data folder's lock).
 *
 * A file of the earlier format (`PRAGMA user_version` 0: the graph index on `vectors` itself) is
 * used as it is, its graph kept up by SQLite on every write.
 *
 * libsql 0.5.29 aborts the process when a Buffer is bound to a statement that returns rows, so
 * vectors travel as hex text (`vector32(unhex(?))`).
 */
export interface SqliteVectorIndexOptions {
  /**
   * Past this many records the graph is built, and the copy in memory let go (default 10,000); a
   * record held sparse counts for less (see the class's comment), unless `countRecords`.
   */
  graphAbove?: number;
  /** Count every record as one against graphAbove, sparse or not (default false). */
  countRecords?: boolean;
  /** With a graph, filtered ranges up to this many records are scored exactly (default 1,000). */
  exactBelow?: number;
  /** The most neighbours asked of the graph before falling back to an exact range scan (default 4,096). */
  annMax?: number;
  /**
   * How the graph keeps each node's neighbours, fixed when the graph is made. Measured on 10,000
   * of the local embedder's vectors (512 dimensions), top 5 of 40 candidates: `float8` with 24
   * neighbours (the default) found 96 % of the exact top 5, about 20 KB of file per record;
   * `float1bit` with 64 neighbours inserts faster but found 87 %; `float8` with libSQL's default
   * 30 neighbours and search list 200 found 100 % for twice the disk and three times the insert
   * and query time; `float32` costs more again.
   */
  compressNeighbors?: "float1bit" | "float8" | "float32";
}

interface Row {
  key: string;
  type: string;
  metadata: string;
  d: number;
}

interface Op {
  /** How many records it writes. */
  size: number;
  run: () => void;
  resolve: () => void;
  reject: (e: unknown) => void;
}

/** The file format: 1 keeps the graph in table `ann`, built past graphAbove (0: on `vectors`, always). */
const FORMAT = 1;
/** The graph's index (on table `ann`) in a file of format 1. */
const GRAPH = "ann_graph";
/** Records read into memory per event-loop turn by `warm`. */
const WARM_SLICE = 1024;
/** Records written per transaction before the event loop gets a turn. */
const WRITE_SLICE = 256;
/** How long one transaction adds records to the graph before the event loop gets a turn (an insertion costs 1-8 ms). */
const GRAPH_SLICE_MS = 8;
/**
 * The most components (a sparse record's non-zero ones, a dense one's all) held in memory for exact
 * scoring, about 100 MB: past them the graph is built however cheap the exact scoring still is.
 */
const MAX_EXACT_COMPONENTS = 16 * 1024 * 1024;
/** Above every character that can follow a prefix in a key (URNs are ASCII). */
const PAST = "\u{10FFFF}";

export class SqliteVectorIndex implements VectorIndex {
  readonly space: EmbeddingSpace;
  readonly path: string;
  readonly #db: Database.Database;
  readonly #graphAbove: number;
  readonly #countRecords: boolean;
  readonly #exactBelow: number;
  readonly #annMax: number;
  readonly #compress: "float1bit" | "float8" | "float32";
  readonly #statements = new Map<string, Database.Statement>();
  /** The graph's index name, once there is one (GRAPH; `vectors_ann` in a file of format 0). */
  #graph: string | undefined;
  /** The highest row id the graph holds; rows above it are still to be added (format 1). */
  #graphUpTo = 0;
  /** Whether queries are answered exactly from memory: no graph yet, or one still catching up. */
  #exactInMemory = true;
  /** Every record, read at the first such query and kept up by every write from then on. */
  #memory: InMemoryVectors | undefined;
  /** The copy in memory while `warm` reads it, a slice at a time: what it holds, and up to which row id. */
  #loading: { memory: InMemoryVectors; upToId: number } | undefined;
  #count = 0;
  /** Records whose distance queries computed (the exact scans' and the graph's candidates). */
  #scored = 0;
  #ops: Op[] = [];
  #flushing = false;
  #growing = false;
  #closed = false;

  private constructor(
    path: string,
    db: Database.Database,
    space: EmbeddingSpace,
    o: SqliteVectorIndexOptions,
  ) {
    this.path = path;
    this.#db = db;
    this.space = { embedderId: space.embedderId, dimension: space.dimension };
    this.#graphAbove = Math.max(0, o.graphAbove ?? 10_000);
    this.#countRecords = o.countRecords ?? false;
    this.#exactBelow = o.exactBelow ?? 1000;
    this.#annMax = o.annMax ?? 4096;
    this.#compress = o.compressNeighbors ?? "float8";
  }

  /**
   * Opens (creating when missing) the index in file `path`. Refuses, with a ConfigError naming both
   * spaces, a file written for another embedding space. `seed`, when given and the file is new,
   * supplies the records to start with (a migration), written in the same transaction that marks
   * the file as initialised, so a crash half-way starts the migration again.
   */
  static open(
    path: string,
    space: EmbeddingSpace,
    options: SqliteVectorIndexOptions & { seed?: () => Iterable<VectorRecord> } = {},
  ): SqliteVectorIndex {
    assertValidSpace(space);
    let db: Database.Database;
    try {
      if (path !== ":memory:") {
        // Every tenant's outputs are in it: only the owner reads it (SQLite's -wal and -shm follow).
        privateDir(dirname(path));
        privateFile(path);
      }
      db = new Database(path);
      db.exec("PRAGMA journal_mode = WAL");
      db.exec("PRAGMA synchronous = NORMAL");
      db.exec("PRAGMA busy_timeout = 2000");
      db.exec("PRAGMA cache_size = -16000"); // 16 MB of pages at most
      db.exec(
        "CREATE TABLE IF NOT EXISTS vector_space (embedder_id TEXT NOT NULL, dimension INTEGER NOT NULL)",
      );
    } catch (cause) {
      throw new UnavailableError(`Cannot open vector index ${path}`, { cause });
    }
    const stored = db.prepare("SELECT embedder_id, dimension FROM vector_space").get() as
      | { embedder_id: string; dimension: number }
      | undefined;
    if (stored) {
      const was = { embedderId: stored.embedder_id, dimension: Number(stored.dimension) };
      if (!sameSpace(was, space)) {
        db.close();
        throw spaceMismatch(`at ${path}`, was, space);
      }
    }
    const index = new SqliteVectorIndex(path, db, space, options);
    try {
      if (!stored) index.#initialise(options.seed);
      index.#load();
    } catch (e) {
      if (db.inTransaction) db.exec("ROLLBACK");
      db.close();
      throw e instanceof ConfigError
        ? e
        : new UnavailableError(`Cannot open vector index ${path}`, { cause: e });
    }
    return index;
  }

  /** Number of records. */
  get size(): number {
    return this.#count;
  }

  /** How many records the queries so far scored: what a query costs, apart from the graph walk. */
  get scored(): number {
    return this.#scored;
  }

  /** Whether queries may use the graph (it exists and holds every record). */
  get graphReady(): boolean {
    return this.#graph !== undefined && !this.#exactInMemory;
  }

  async upsert(records: readonly VectorRecord[]): Promise<void> {
    checkRecords(records, this.space.dimension);
    if (records.length === 0) return;
    // Queued as float32 copies (the caller may reuse its arrays), encoded when written.
    const rows = records.map(
      (r) => [r.key, r.type, JSON.stringify(r.metadata ?? {}), r.vector.slice()] as const,
    );
    return this.#enqueue(rows.length, () => {
      // A new key (most are: an output is indexed once) is one statement; a key there already, two.
      const insert = this.#sql(INSERT_NEW);
      const update = this.#sql(UPDATE_KEY);
      for (const [key, type, metadata, vector] of rows) {
        const encoded = hex(vector);
        let row = insert.get(key, type, metadata, encoded) as { id: number } | undefined;
        if (row) this.#count++;
        else row = update.get(type, metadata, encoded, key) as { id: number };
        const { id } = row;
        // A row the graph already holds is replaced there too (rows above #graphUpTo are added later).
        if (this.#graph === GRAPH && Number(id) <= this.#graphUpTo)
          this.#sql("INSERT OR REPLACE INTO ann (id, e) SELECT id, e FROM vectors WHERE id = ?").run(id);
        this.#memory?.put(key, type, metadata, vector);
        this.#loading?.memory.put(key, type, metadata, vector);
      }
    });
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    const doomed = [...new Set(keys)];
    return this.#enqueue(doomed.length, () => {
      const del = this.#sql("DELETE FROM vectors WHERE key = ? RETURNING id");
      for (const k of doomed) {
        const gone = del.get(k) as { id: number } | undefined;
        if (!gone) continue;
        this.#count--;
        if (this.#graph === GRAPH) this.#sql("DELETE FROM ann WHERE id = ?").run(gone.id);
        this.#memory?.delete(k);
        this.#loading?.memory.delete(k);
      }
    });
  }

  /** Known only while the records are held in memory (a small index); past that, a query tells. */
  mayHold(type: string): boolean {
    return !this.#exactInMemory || this.#closed || this.#inMemory().holds(type);
  }

  async query(query: VectorQuery): Promise<VectorMatch[]> {
    checkQuery(query, this.space.dimension);
    if (this.#closed) throw new UnavailableError(`Vector index ${this.path} is closed`);
    if (this.#exactInMemory) {
      const { matches, scored } = this.#inMemory().query(query);
      this.#scored += scored;
      return matches;
    }
    const q = hex(query.vector);
    const { where, params } = filterSql(query);
    const inRange = Number(
      (
        this.#sql(`SELECT count(*) AS n FROM (SELECT 1 FROM vectors WHERE ${where} LIMIT ?)`).get(
          ...params,
          this.#exactBelow + 1,
        ) as { n: number }
      ).n,
    );
    if (inRange === 0) return [];
    if (inRange <= this.#exactBelow || !this.#graph)
      return this.#exact(q, where, params, query.topK, inRange);
    const keep = (r: Row) =>
      (query.type === undefined || r.type === query.type) &&
      (query.keyPrefix === undefined || r.key.startsWith(query.keyPrefix));
    for (let fetch = Math.max(4 * query.topK, 100); fetch <= this.#annMax; fetch *= 4) {
      const rows = this.#sql(
        `SELECT v.key AS key, v.type AS type, v.metadata AS metadata,
                vector_distance_cos(v.e, vector32(unhex(?))) AS d
           FROM vector_top_k('${this.#graph}', vector32(unhex(?)), ?) AS t JOIN vectors AS v ON v.id = t.id`,
      ).all(q, q, fetch) as Row[];
      this.#scored += rows.length;
      const kept = rows.filter(keep);
      if (kept.length >= query.topK || rows.length < fetch) return ranked(kept, query.topK);
    }
    return this.#exact(q, where, params, query.topK, inRange);
  }

  /** Writes what is queued and closes the file. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    while (this.#ops.length > 0 || this.#flushing) await new Promise((r) => setImmediate(r));
    this.#closed = true;
    this.#db.close();
  }

  #exact(q: string, where: string, params: readonly string[], topK: number, inRange: number): VectorMatch[] {
    this.#scored += inRange;
    const rows = this.#sql(
      `SELECT key, type, metadata, vector_distance_cos(e, vector32(unhex(?))) AS d
         FROM vectors WHERE ${where} ORDER BY d, key LIMIT ?`,
    ).all(q, ...params, topK) as Row[];
    return rows.map(match);
  }

  #initialise(seed: (() => Iterable<VectorRecord>) | undefined): void {
    const d = this.space.dimension;
    this.#db.exec("BEGIN IMMEDIATE");
    this.#db.exec(
      `DROP TABLE IF EXISTS vectors;
       DROP TABLE IF EXISTS ann;
       CREATE TABLE vectors (
         id INTEGER PRIMARY KEY,
         key TEXT NOT NULL UNIQUE,
         type TEXT NOT NULL,
         metadata TEXT NOT NULL,
         e F32_BLOB(${d}) NOT NULL
       );
       CREATE INDEX vectors_type_key ON vectors (type, key);
       PRAGMA user_version = ${FORMAT};`,
    );
    if (seed) {
      const put = this.#db.prepare(UPSERT);
      for (const r of seed()) put.run(r.key, r.type, JSON.stringify(r.metadata ?? {}), hex(r.vector));
    }
    this.#db
      .prepare("INSERT INTO vector_space (embedder_id, dimension) VALUES (?, ?)")
      .run(this.space.embedderId, d);
    this.#db.exec("COMMIT");
  }

  /** Reads what the file holds: its format, its graph and how far that got, its size. */
  #load(): void {
    const has = (type: string, name: string) =>
      this.#db.prepare("SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?").get(type, name) !==
      undefined;
    const format = Number(
      (this.#db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version,
    );
    this.#count = Number((this.#db.prepare("SELECT count(*) AS n FROM vectors").get() as { n: number }).n);
    if (format === 0 && has("index", "vectors_ann")) {
      this.#graph = "vectors_ann"; // the earlier format: SQLite keeps the graph on every write
      this.#exactInMemory = false;
      return;
    }
    if (has("table", "ann")) {
      this.#graph = GRAPH;
      this.#graphUpTo = Number(
        (this.#db.prepare("SELECT coalesce(max(id), 0) AS n FROM ann").get() as { n: number }).n,
      );
    }
    const lastId = Number(
      (this.#db.prepare("SELECT coalesce(max(id), 0) AS n FROM vectors").get() as { n: number }).n,
    );
    this.#exactInMemory = !(this.#graph && this.#graphUpTo >= lastId);
  }

  /**
   * Reads the records into memory ahead of the first query that needs them (a server that has just
   * started, before its first requests), WARM_SLICE rows per event-loop turn, so that the event
   * loop is never held for long; resolves once they are all there. Does nothing when queries will
   * not need them (the graph answers) or they are there. A query meanwhile reads the rest at once.
   */
  async warm(): Promise<void> {
    if (!this.#exactInMemory || this.#memory || this.#loading || this.#closed) return;
    const loading = { memory: new InMemoryVectors(this.space.dimension), upToId: 0 };
    this.#loading = loading;
    try {
      while (this.#loading === loading && !this.#closed) {
        if (!this.#readSlice(loading, WARM_SLICE)) {
          this.#loaded(loading);
          return;
        }
        await new Promise((r) => setImmediate(r));
      }
    } catch {
      if (this.#loading === loading) this.#loading = undefined; // the first query reads them
    }
  }

  /** Reads up to `limit` more rows into `loading`; true when there may be more. */
  #readSlice(loading: { memory: InMemoryVectors; upToId: number }, limit: number): boolean {
    const rows = this.#sql(
      "SELECT id, key, type, metadata, e FROM vectors WHERE id > ? ORDER BY id LIMIT ?",
    ).all(loading.upToId, limit) as {
      id: number;
      key: string;
      type: string;
      metadata: string;
      e: ArrayBuffer | Uint8Array;
    }[];
    for (const r of rows) {
      loading.memory.put(r.key, r.type, r.metadata, floats(r.e, this.space.dimension));
      loading.upToId = Number(r.id);
    }
    return rows.length === limit;
  }

  #loaded(loading: { memory: InMemoryVectors; upToId: number }): InMemoryVectors {
    this.#loading = undefined;
    this.#memory = loading.memory;
    // A graph left half-built (a stop while it caught up) goes on from where it was, if wanted.
    if (this.#wantsGraph()) this.#growGraph();
    return loading.memory;
  }

  /** Every record, read into memory at the first query that needs them (the rest of them, when warm began). */
  #inMemory(): InMemoryVectors {
    if (this.#memory) return this.#memory;
    const loading = this.#loading ?? { memory: new InMemoryVectors(this.space.dimension), upToId: 0 };
    while (this.#readSlice(loading, WARM_SLICE * 4));
    return this.#loaded(loading);
  }

  /**
   * Whether the graph is to be built (or kept up): always once queries use it; while they are
   * answered from memory, when scoring the records there exactly costs more than graphAbove dense
   * records (or they hold more than MAX_EXACT_COMPONENTS); before the records are read into memory
   * (no query yet), when they are more than graphAbove.
   */
  #wantsGraph(): boolean {
    if (!this.#exactInMemory) return this.#graph === GRAPH;
    if (this.#count <= this.#graphAbove) return false;
    const memory = this.#memory;
    if (!memory || this.#countRecords) return true;
    return memory.work > this.#graphAbove || memory.components > MAX_EXACT_COMPONENTS;
  }

  /** Queues a change; the changes of one event-loop turn are written in one transaction. */
  #enqueue(size: number, run: () => void): Promise<void> {
    if (this.#closed) return Promise.reject(new UnavailableError(`Vector index ${this.path} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.#ops.push({ size, run, resolve, reject });
      if (this.#ops.length === 1 && !this.#flushing) setImmediate(() => this.#flush());
    });
  }

  /** Writes the queued changes, about WRITE_SLICE records per transaction. */
  #flush(): void {
    let records = 0;
    let n = 0;
    while (n < this.#ops.length && records < WRITE_SLICE) records += (this.#ops[n++] as Op).size;
    const ops = this.#ops.splice(0, n);
    if (ops.length === 0) return;
    this.#flushing = true;
    try {
      this.#db.exec("BEGIN IMMEDIATE");
      try {
        for (const op of ops) op.run();
        this.#db.exec("COMMIT");
      } catch (e) {
        if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
        this.#reload(); // what memory and the counters hold may be of the undone transaction
        throw e;
      }
      for (const op of ops) op.resolve();
    } catch (cause) {
      const e = new UnavailableError(`Cannot write vector index ${this.path}`, { cause });
      for (const op of ops) op.reject(e);
    } finally {
      this.#flushing = false;
      if (this.#ops.length > 0) setImmediate(() => this.#flush());
      else if (this.#wantsGraph()) this.#growGraph();
    }
  }

  #reload(): void {
    this.#graph = undefined;
    this.#graphUpTo = 0;
    this.#memory = undefined;
    this.#loading = undefined;
    this.#load();
  }

  /**
   * Adds the rows the graph does not hold yet, GRAPH_SLICE per transaction with a turn of the event
   * loop between (writes go first); creates the graph when the index has just passed graphAbove.
   * Once it holds every row, the copy in memory is let go and queries use it.
   */
  #growGraph(): void {
    if (this.#growing || this.#closed) return;
    this.#growing = true;
    const step = () => {
      if (this.#closed) {
        this.#growing = false;
        return;
      }
      if (this.#ops.length > 0 || this.#flushing) return void setImmediate(step);
      if (!this.#wantsGraph()) {
        this.#growing = false; // the records read into memory since are cheaper to score exactly
        return;
      }
      try {
        this.#db.exec("BEGIN IMMEDIATE");
        try {
          if (!this.#graph) this.#createGraph();
          // As many rows as fit in GRAPH_SLICE_MS (at least one), then a turn of the event loop.
          const next = this.#sql(
            "INSERT INTO ann (id, e) SELECT id, e FROM vectors WHERE id > ? ORDER BY id LIMIT 1 RETURNING id",
          );
          const started = performance.now();
          let upTo = this.#graphUpTo;
          let more = true;
          while (more && performance.now() - started < GRAPH_SLICE_MS) {
            const added = next.get(upTo) as { id: number } | undefined;
            if (added) upTo = Number(added.id);
            else more = false;
          }
          this.#db.exec("COMMIT");
          this.#graphUpTo = upTo;
          if (more) return void setImmediate(step);
          this.#exactInMemory = false; // caught up: queries use the graph
          this.#memory = undefined;
          this.#loading = undefined;
        } catch (e) {
          if (this.#db.inTransaction) this.#db.exec("ROLLBACK");
          throw e;
        }
      } catch {
        // Left as it was: the next write tries again, and until then queries are answered exactly.
      }
      this.#growing = false;
    };
    setImmediate(step);
  }

  #createGraph(): void {
    this.#db.exec(
      `CREATE TABLE IF NOT EXISTS ann (id INTEGER PRIMARY KEY, e F32_BLOB(${this.space.dimension}) NOT NULL);
       CREATE INDEX IF NOT EXISTS ann_graph ON ann (libsql_vector_idx(e, 'metric=cosine',
         'compress_neighbors=${this.#compress}', 'max_neighbors=24', 'insert_l=50', 'search_l=100'));`,
    );
    this.#graph = GRAPH;
    this.#graphUpTo = 0;
  }

  #sql(text: string): Database.Statement {
    let s = this.#statements.get(text);
    if (!s) {
      s = this.#db.prepare(text);
      this.#statements.set(text, s);
    }
    return s;
  }
}

/** Inserts or replaces by key; answers the row id. */
const UPSERT = `INSERT INTO vectors (key, type, metadata, e) VALUES (?, ?, ?, vector32(unhex(?)))
  ON CONFLICT (key) DO UPDATE SET type = excluded.type, metadata = excluded.metadata, e = excluded.e`;
const INSERT_NEW = `INSERT INTO vectors (key, type, metadata, e) VALUES (?, ?, ?, vector32(unhex(?)))
  ON CONFLICT (key) DO NOTHING RETURNING id`;
const UPDATE_KEY =
  "UPDATE vectors SET type = ?, metadata = ?, e = vector32(unhex(?)) WHERE key = ? RETURNING id";

/** The WHERE clause (and its parameters) for a query's type and key prefix. */
function filterSql(query: VectorQuery): { where: string; params: string[] } {
  const terms: string[] = [];
  const params: string[] = [];
  if (query.type !== undefined) {
    terms.push("type = ?");
    params.push(query.type);
  }
  if (query.keyPrefix) {
    terms.push("key >= ? AND key < ?");
    params.push(query.keyPrefix, query.keyPrefix + PAST);
  }
  return { where: terms.length ? terms.join(" AND ") : "1", params };
}

/** The best `topK` rows, the smaller distance first, then the smaller key (as the exact scan orders them). */
function ranked(rows: Row[], topK: number): VectorMatch[] {
  rows.sort((a, b) => a.d - b.d || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return rows.slice(0, topK).map(match);
}

const match = (r: Row): VectorMatch => ({
  key: r.key,
  score: 1 - r.d,
  type: r.type,
  metadata: JSON.parse(r.metadata) as VectorMatch["metadata"],
});

/** The vector's float32 bytes (little-endian, as libSQL stores them) as hex. */
function hex(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i] as number, i * 4);
  return bytes.toString("hex");
}

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** The float32 vector stored in `bytes` (little-endian). */
function floats(bytes: ArrayBuffer | Uint8Array, dimension: number): Float32Array {
  // On a little-endian machine (all that Node ships for but s390x), the bytes are the floats
  // (read in place: InMemoryVectors keeps copies of its own).
  const offset = bytes instanceof Uint8Array ? bytes.byteOffset : 0;
  if (LITTLE_ENDIAN && offset % 4 === 0)
    return new Float32Array(bytes instanceof Uint8Array ? bytes.buffer : bytes, offset, dimension);
  const view =
    bytes instanceof Uint8Array
      ? new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
      : new DataView(bytes);
  const out = new Float32Array(dimension);
  for (let i = 0; i < dimension; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}
