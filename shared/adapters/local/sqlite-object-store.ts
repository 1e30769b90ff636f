import { ValidationError } from "../../kernel/errors.ts";
import {
  assertValidKey,
  type ListOptions,
  type ListPage,
  type ObjectStore,
} from "../../ports/object-store.ts";
import { BytesCache, DEFAULT_CACHE_BYTES } from "./bytes-cache.ts";
import { openLocation, type SqliteDatabase, type SqliteLocation } from "./sqlite-database.ts";

/**
 * Objects as rows of one SQLite table (the local runtime's default object store), on a
 * SqliteDatabase shared with the state store: a resource write joins the same group commit as
 * the task events around it, and is durable when its promise resolves.
 *
 * Keys are TEXT under SQLite's BINARY collation (memcmp of UTF-8), which is S3's byte order, so a
 * prefix is one index range. Listing with a delimiter skips each "folder" in one index seek. The
 * bodies (often a kilobyte or more) stay out of that index: the table is an ordinary rowid table
 * with a unique index on the key, so a write changes a few small index pages, not a page of bodies.
 *
 * The store keeps the bytes it wrote or read (and the keys it knows are absent) in memory, up to
 * `cacheBytes`: its process is the only writer, and every write goes through it. `put` keeps a
 * reference to the bytes it is given and `get` returns shared bytes: neither may be modified.
 */
export type SqliteObjectStoreOptions = SqliteLocation & {
  /** Bytes of objects (and their keys) held in memory; 0 turns the cache off. Default DEFAULT_CACHE_BYTES, 8 MiB. */
  cacheBytes?: number;
};

const SCHEMA = `
CREATE TABLE IF NOT EXISTS objects (
  key TEXT NOT NULL UNIQUE,
  body BLOB NOT NULL,
  content_type TEXT
);
`;
const SCAN_BATCH = 256;

export class SqliteObjectStore implements ObjectStore {
  readonly #db: SqliteDatabase;
  readonly #owned: boolean;
  readonly #cache: BytesCache;

  constructor(options: SqliteObjectStoreOptions) {
    ({ db: this.#db, owned: this.#owned } = openLocation(options));
    this.#db.exec(SCHEMA);
    this.#cache = new BytesCache(options.cacheBytes ?? DEFAULT_CACHE_BYTES);
    this.#db.onRollback(() => this.#cache.clear());
    this.#db.onExternalChange(() => this.#cache.clear()); // another process wrote
  }

  async put(key: string, body: Uint8Array | string, options: { contentType?: string } = {}): Promise<void> {
    assertValidKey(key);
    const bytes = typeof body === "string" ? Buffer.from(body) : body;
    return this.#db.write(() => () => {
      this.#db
        .sql(
          `INSERT INTO objects (key, body, content_type) VALUES (?, ?, ?)
           ON CONFLICT (key) DO UPDATE SET body = excluded.body, content_type = excluded.content_type`,
        )
        .run(key, asBuffer(bytes), options.contentType ?? null);
      this.#cache.set(key, bytes);
    });
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return this.#get(key);
  }

  async getMany(keys: readonly string[]): Promise<(Uint8Array | undefined)[]> {
    return keys.map((k) => this.#get(k));
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    return this.#db.write(() => () => {
      this.#db.sql("DELETE FROM objects WHERE key = ?").run(key);
      this.#cache.set(key, null);
    });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const limit = Math.max(1, Math.min(options.limit ?? 1000, 1000));
    const { delimiter } = options;
    const end = upperBound(prefix);
    let [from, inclusive] = options.cursor === undefined ? [prefix, true] : decodeCursor(options.cursor);
    const found: { k: string; folder: boolean }[] = [];
    scan: while (found.length <= limit) {
      // Plain range conditions (no OR, no IS NULL), so that SQLite walks the key index from `from`.
      const rows = this.#db
        .sql(
          `SELECT key FROM objects WHERE key ${inclusive ? ">=" : ">"} ?${end === undefined ? "" : " AND key < ?"}
           ORDER BY key LIMIT ${SCAN_BATCH}`,
        )
        .all(...(end === undefined ? [from] : [from, end])) as { key: string }[];
      for (const { key } of rows) {
        const at = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
        if (at >= 0) {
          // A "folder": report it once and seek past everything below it.
          const folder = key.slice(0, at + (delimiter as string).length);
          found.push({ k: folder, folder: true });
          const next = upperBound(folder);
          if (next === undefined) break scan;
          [from, inclusive] = [next, true];
          continue scan;
        }
        found.push({ k: key, folder: false });
        [from, inclusive] = [key, false];
        if (found.length > limit) break scan;
      }
      if (rows.length < SCAN_BATCH) break;
    }
    const page = found.slice(0, limit);
    const result: ListPage = {
      keys: page.filter((e) => !e.folder).map((e) => e.k),
      prefixes: page.filter((e) => e.folder).map((e) => e.k),
    };
    const last = page.at(-1);
    if (found.length > limit && last) {
      const resume = last.folder ? upperBound(last.k) : last.k;
      if (resume !== undefined) result.cursor = encodeCursor(resume, last.folder);
    }
    return result;
  }

  /** Resolves once every write made so far is committed and on disk (SqliteDatabase.untilDurable). */
  untilDurable(): Promise<void> {
    return this.#db.untilDurable();
  }

  async close(): Promise<void> {
    if (this.#owned) await this.#db.close();
  }

  #get(key: string): Uint8Array | undefined {
    assertValidKey(key);
    this.#db.catchUp(); // what another process committed since is not answered from memory
    const known = this.#cache.get(key);
    if (known !== undefined) return known ?? undefined;
    const row = this.#db.sql("SELECT body FROM objects WHERE key = ?").get(key) as
      | { body: Uint8Array }
      | undefined;
    const bytes = row ? row.body : undefined;
    this.#cache.set(key, bytes ?? null);
    return bytes;
  }
}

/**
 * The least string greater than every string that starts with `s`, in UTF-8 byte order (which is
 * code point order): `s` with its last code point raised by one. Undefined when there is none.
 */
export function upperBound(s: string): string | undefined {
  const points = [...s];
  while (points.length > 0) {
    const last = (points.pop() as string).codePointAt(0) as number;
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1; // no surrogates in UTF-8
      return points.join("") + String.fromCodePoint(next);
    }
  }
  return undefined;
}

function encodeCursor(from: string, inclusive: boolean): string {
  return Buffer.from(JSON.stringify([from, inclusive])).toString("base64url");
}

function decodeCursor(cursor: string): [string, boolean] {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(value) && typeof value[0] === "string" && typeof value[1] === "boolean")
      return [value[0], value[1]];
  } catch {
    // reported below
  }
  throw new ValidationError("This listing cursor was not made by this store; start the listing again");
}

const asBuffer = (b: Uint8Array): Buffer =>
  Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
