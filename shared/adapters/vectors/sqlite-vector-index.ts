import { dirname } from "node:path";
import Database from "libsql";
import { ConfigError, UnavailableError } from "../../errors.ts";
import type {
  EmbeddingSpace,
  VectorIndex,
  VectorMatch,
  VectorQuery,
  VectorRecord,
} from "../../ports/vector-index.ts";
import { privateDir, privateFile } from "../local/private-files.ts";
import { assertValidSpace, checkQuery, checkRecords, sameSpace, spaceMismatch } from "./vector-checks.ts";

/**
 * A vector index in its own SQLite file (libsql), searched through libSQL's DiskANN index
 * (`libsql_vector_idx`, `vector_top_k`): a query reads a few hundred graph nodes from disk instead
 * of scoring every record, and the vectors stay on disk, not in the heap.
 *
 * Filters (type, key prefix) are applied to the approximate neighbours, which can leave fewer than
 * topK; so a query first counts, through the (type, key) B-tree, up to `exactBelow` records that
 * pass the filters. When that many or fewer do (a small tenant, a conversation, an assistant
 * list, every test), it scores them all, exactly, in SQL. Otherwise it asks the graph for more
 * neighbours than it needs (4 x topK, at least 100) and, while fewer than topK pass the filters and
 * the graph still had more to give, asks again for four times as many, up to `annMax`; past that
 * it scores the filtered range exactly (the filter then keeps a small share of a large index,
 * which the graph cannot find cheaply and the range scan is bounded by).
 *
 * Its own file rather than arbor.db: the index is derived data (a record is written after the
 * resource it describes, and a lost record makes one old result unfindable, nothing worse), a
 * graph insertion costs about a millisecond of CPU that would otherwise lengthen the state store's
 * group-commit turns, and a separate file can be dropped and rebuilt without touching the state.
 * WAL with synchronous=NORMAL: a commit survives the process being killed; a power cut may lose
 * the last commits, which only makes those results unfindable. Writes that arrive in one
 * event-loop turn are written in one transaction. One process owns the file at a time.
 *
 * libsql 0.5.29 aborts the process when a Buffer is bound to a statement that returns rows, so
 * vectors travel as hex text (`vector32(unhex(?))`).
 */
export interface SqliteVectorIndexOptions {
  /** Filtered ranges up to this many records are scored exactly (default 1,000). */
  exactBelow?: number;
  /** The most neighbours asked of the graph before falling back to an exact range scan (default 4,096). */
  annMax?: number;
  /**
   * How the graph keeps each node's neighbours, fixed when the file is created. Measured on 10,000
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

const INDEX_NAME = "vectors_ann";
/** Records written per transaction before the event loop gets a turn. */
const WRITE_SLICE = 4;
/** Above every character that can follow a prefix in a key (URNs are ASCII). */
const PAST = "\u{10FFFF}";

export class SqliteVectorIndex implements VectorIndex {
  readonly space: EmbeddingSpace;
  readonly path: string;
  readonly #db: Database.Database;
  readonly #exactBelow: number;
  readonly #annMax: number;
  readonly #compress: "float1bit" | "float8" | "float32";
  readonly #statements = new Map<string, Database.Statement>();
  /** Records whose distance queries computed (the exact scans' and the graph's candidates). */
  #scored = 0;
  #ops: Op[] = [];
  #flushing = false;
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
      return new SqliteVectorIndex(path, db, space, options);
    }
    const index = new SqliteVectorIndex(path, db, space, options);
    index.#initialise(options.seed);
    return index;
  }

  /** Number of records (counts them: for tests and tools, not the request path). */
  get size(): number {
    return Number((this.#sql("SELECT count(*) AS n FROM vectors").get() as { n: number }).n);
  }

  /** How many records the queries so far scored: what a query costs, apart from the graph walk. */
  get scored(): number {
    return this.#scored;
  }

  async upsert(records: readonly VectorRecord[]): Promise<void> {
    checkRecords(records, this.space.dimension);
    if (records.length === 0) return;
    // Queued as float32 copies (half the size of their hex), encoded when written.
    const rows = records.map(
      (r) => [r.key, r.type, JSON.stringify(r.metadata ?? {}), r.vector.slice()] as const,
    );
    return this.#enqueue(rows.length, () => {
      const put = this.#sql(UPSERT);
      for (const [key, type, metadata, vector] of rows) put.run(key, type, metadata, hex(vector));
    });
  }

  async delete(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    const doomed = [...new Set(keys)];
    return this.#enqueue(doomed.length, () => {
      const del = this.#sql("DELETE FROM vectors WHERE key = ?");
      for (const k of doomed) del.run(k);
    });
  }

  async query(query: VectorQuery): Promise<VectorMatch[]> {
    checkQuery(query, this.space.dimension);
    if (this.#closed) throw new UnavailableError(`Vector index ${this.path} is closed`);
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
    if (inRange <= this.#exactBelow) return this.#exact(q, where, params, query.topK, inRange);
    const keep = (r: Row) =>
      (query.type === undefined || r.type === query.type) &&
      (query.keyPrefix === undefined || r.key.startsWith(query.keyPrefix));
    for (let fetch = Math.max(4 * query.topK, 100); fetch <= this.#annMax; fetch *= 4) {
      const rows = this.#sql(
        `SELECT v.key AS key, v.type AS type, v.metadata AS metadata,
                vector_distance_cos(v.e, vector32(unhex(?))) AS d
           FROM vector_top_k('${INDEX_NAME}', vector32(unhex(?)), ?) AS t JOIN vectors AS v ON v.id = t.id`,
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
    try {
      this.#db.exec(
        `DROP TABLE IF EXISTS vectors;
         CREATE TABLE vectors (
           id INTEGER PRIMARY KEY,
           key TEXT NOT NULL UNIQUE,
           type TEXT NOT NULL,
           metadata TEXT NOT NULL,
           e F32_BLOB(${d}) NOT NULL
         );
         CREATE INDEX vectors_type_key ON vectors (type, key);
         CREATE INDEX ${INDEX_NAME} ON vectors (libsql_vector_idx(e, 'metric=cosine',
           'compress_neighbors=${this.#compress}', 'max_neighbors=24', 'insert_l=50', 'search_l=100'));`,
      );
      if (seed) {
        const put = this.#db.prepare(UPSERT);
        for (const r of seed()) put.run(r.key, r.type, JSON.stringify(r.metadata ?? {}), hex(r.vector));
      }
      this.#db
        .prepare("INSERT INTO vector_space (embedder_id, dimension) VALUES (?, ?)")
        .run(this.space.embedderId, d);
      this.#db.exec("COMMIT");
    } catch (e) {
      this.#db.exec("ROLLBACK");
      this.#db.close();
      throw e instanceof ConfigError
        ? e
        : new UnavailableError(`Cannot create vector index ${this.path}`, { cause: e });
    }
  }

  /** Queues a change; the changes of one event-loop turn are written in one transaction. */
  #enqueue(size: number, run: () => void): Promise<void> {
    if (this.#closed) return Promise.reject(new UnavailableError(`Vector index ${this.path} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.#ops.push({ size, run, resolve, reject });
      if (this.#ops.length === 1 && !this.#flushing) setImmediate(() => this.#flush());
    });
  }

  /**
   * Writes the queued changes, about WRITE_SLICE records per transaction (a graph insertion costs
   * about a millisecond): between slices other work of the event loop runs.
   */
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
        throw e;
      }
      for (const op of ops) op.resolve();
    } catch (cause) {
      const e = new UnavailableError(`Cannot write vector index ${this.path}`, { cause });
      for (const op of ops) op.reject(e);
    } finally {
      this.#flushing = false;
      if (this.#ops.length > 0) setImmediate(() => this.#flush());
    }
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

const UPSERT = `INSERT INTO vectors (key, type, metadata, e) VALUES (?, ?, ?, vector32(unhex(?)))
  ON CONFLICT (key) DO UPDATE SET type = excluded.type, metadata = excluded.metadata, e = excluded.e`;

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
