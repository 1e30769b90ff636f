import { randomBytes } from "node:crypto";
import {
  closeSync,
  fsync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { UnavailableError } from "../../kernel/errors.ts";
import {
  assertValidKey,
  compareKeys,
  type ListOptions,
  type ListPage,
  type ObjectStore,
} from "../../ports/object-store.ts";
import { BytesCache, DEFAULT_CACHE_BYTES } from "./bytes-cache.ts";

/**
 * Objects as files under a root folder, the key as the path. Each key segment is kept as is when
 * it only uses `A-Z a-z 0-9 . _ : -` (every URN does) and percent-encoded otherwise. Folders get
 * a `+` suffix so that, as on S3, `a/b` and `a/b/c` can both exist:
 *
 *   cld:common.Tenant.local.json
 *   cld:common.Tenant.local+/common.Conversation.c1.json
 *
 * Writes are atomic (temporary file, fsync, rename), so a crash never leaves half a document.
 *
 * The small file system calls (open, write, rename, read, list) run synchronously: for documents
 * of a few kilobytes they take microseconds in the page cache, less than handing each to the
 * thread pool and back. The one slow call, fsync, waits on the thread pool while the process
 * goes on.
 *
 * With `cache` on (what the local runtime does: its process is the only writer of the folder),
 * the store keeps what it wrote or read (bytes, absent keys, folder listings and the folders it
 * knows exist) and answers from memory; it updates that memory only after a write is in place, and
 * writes to one key one at a time, so memory and disk never disagree. Cached bytes are shared:
 * callers must not modify what `get` returns.
 */
export interface FileObjectStoreOptions {
  root: string;
  /** fsync each file before it is renamed into place (default true). */
  durable?: boolean;
  /** Keep written and read objects in memory (one writer process only). Default off. */
  cache?: boolean | { maxBytes?: number };
}

const KEEP = /^[A-Za-z0-9._:-]$/;
const DIR_SUFFIX = "+";
const TMP_MARK = "~tmp~";

function encodeSegment(s: string): string {
  let out = "";
  for (const ch of s) {
    if (KEEP.test(ch)) out += ch;
    else for (const b of Buffer.from(ch)) out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const decodeSegment = (s: string): string => decodeURIComponent(s);

export class FileObjectStore implements ObjectStore {
  readonly #root: string;
  readonly #durable: boolean;
  readonly #cache: MemoryCache | undefined;

  constructor(options: FileObjectStoreOptions) {
    this.#root = resolve(options.root);
    this.#durable = options.durable ?? true;
    if (options.cache)
      this.#cache = new MemoryCache(
        (typeof options.cache === "object" ? options.cache.maxBytes : undefined) ?? DEFAULT_CACHE_BYTES,
      );
  }

  #path(key: string): string {
    assertValidKey(key);
    const segments = key.split("/");
    const last = segments.pop() as string;
    return join(this.#root, ...segments.map((s) => encodeSegment(s) + DIR_SUFFIX), encodeSegment(last));
  }

  async put(key: string, body: Uint8Array | string): Promise<void> {
    const path = this.#path(key);
    const cache = this.#cache;
    if (!cache) return this.#write(key, path, body);
    const bytes = typeof body === "string" ? Buffer.from(body) : body;
    await cache.serially(key, async () => {
      cache.changing(key, path);
      await this.#write(key, path, bytes);
      cache.written(key, path, bytes, this.#root);
    });
  }

  async #write(key: string, path: string, body: Uint8Array | string): Promise<void> {
    const tmp = `${path}${TMP_MARK}${randomBytes(6).toString("hex")}`;
    let fd: number | undefined;
    try {
      const dir = dirname(path);
      // Only the owner reads the data: folders 0700, files 0600.
      if (!this.#cache?.hasDir(dir)) mkdirSync(dir, { recursive: true, mode: 0o700 });
      fd = openSync(tmp, "w", 0o600);
      writeFileSync(fd, body);
      if (this.#durable) await fsyncOnPool(fd);
      closeSync(fd);
      fd = undefined;
      renameSync(tmp, path);
    } catch (cause) {
      if (fd !== undefined) closeSync(fd);
      rmSync(tmp, { force: true });
      throw new UnavailableError(
        `Could not write ${key} under ${this.#root}; check that the folder is writable`,
        { cause },
      );
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const path = this.#path(key);
    const cache = this.#cache;
    const known = cache?.bytes(key);
    if (known !== undefined) return known ?? undefined;
    const ticket = cache?.reading(key);
    let bytes: Uint8Array | undefined;
    try {
      bytes = readFileSync(path);
    } catch (cause) {
      if (!isNotFound(cause)) {
        if (ticket) cache?.read(key, Object.assign(ticket, { stale: true }), undefined); // remembers nothing
        throw new UnavailableError(`Could not read ${key} under ${this.#root}`, { cause });
      }
    }
    if (cache && ticket) cache.read(key, ticket, bytes);
    return bytes;
  }

  getMany(keys: readonly string[]): Promise<(Uint8Array | undefined)[]> {
    return Promise.all(keys.map((k) => this.get(k)));
  }

  async delete(key: string): Promise<void> {
    const path = this.#path(key);
    const cache = this.#cache;
    if (!cache) return rmSync(path, { force: true });
    await cache.serially(key, async () => {
      cache.changing(key, path);
      rmSync(path, { force: true });
      cache.deleted(key, path);
    });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const limit = Math.max(1, Math.min(options.limit ?? 1000, 1000));
    const after =
      options.cursor === undefined ? undefined : Buffer.from(options.cursor, "base64url").toString();
    const { delimiter } = options;

    // Start the walk at the deepest folder the prefix names in full.
    const cut = prefix.lastIndexOf("/");
    const base = cut < 0 ? "" : prefix.slice(0, cut + 1);
    const dir = base === "" ? this.#root : dirname(this.#path(`${base}x`));
    const found = { keys: [] as string[], folders: [] as string[] };
    await this.#walk(dir, base, prefix, delimiter, found);

    // With a delimiter, fold keys into their common prefix ("folder").
    const keys = new Set<string>();
    const prefixes = new Set<string>(found.folders);
    for (const key of found.keys) {
      if (delimiter) {
        const at = key.indexOf(delimiter, prefix.length);
        if (at >= 0) {
          prefixes.add(key.slice(0, at + delimiter.length));
          continue;
        }
      }
      keys.add(key);
    }
    const merged = [
      ...[...keys].map((k) => ({ k, folder: false })),
      ...[...prefixes].map((k) => ({ k, folder: true })),
    ]
      .filter((e) => after === undefined || compareKeys(e.k, after) > 0)
      .sort((a, b) => compareKeys(a.k, b.k));
    const page = merged.slice(0, limit);
    const result: ListPage = {
      keys: page.filter((e) => !e.folder).map((e) => e.k),
      prefixes: page.filter((e) => e.folder).map((e) => e.k),
    };
    const last = page[page.length - 1];
    if (merged.length > limit && last) result.cursor = Buffer.from(last.k).toString("base64url");
    return result;
  }

  async #walk(
    dir: string,
    keyBase: string,
    prefix: string,
    delimiter: string | undefined,
    out: { keys: string[]; folders: string[] },
  ): Promise<void> {
    const names = await this.#readdir(dir);
    for (const name of names) {
      if (name.includes(TMP_MARK)) continue;
      if (name.endsWith(DIR_SUFFIX)) {
        const folderKey = `${keyBase}${decodeSegment(name.slice(0, -DIR_SUFFIX.length))}/`;
        // Descend only where keys below could start with the prefix.
        if (!(folderKey.startsWith(prefix) || prefix.startsWith(folderKey))) continue;
        if (delimiter === "/" && folderKey.startsWith(prefix) && folderKey.length > prefix.length) {
          // Everything below folds into this one common prefix: no need to read it, only to know it is not empty.
          if (await this.#hasAny(join(dir, name))) out.folders.push(folderKey);
          continue;
        }
        await this.#walk(join(dir, name), folderKey, prefix, delimiter, out);
      } else {
        const key = `${keyBase}${decodeSegment(name)}`;
        if (key.startsWith(prefix)) out.keys.push(key);
      }
    }
  }

  /** The names in a folder (none when it does not exist), from memory when cached. */
  async #readdir(dir: string): Promise<readonly string[]> {
    const cache = this.#cache;
    const known = cache?.listing(dir);
    if (known) return known;
    const ticket = cache?.reading(`dir:${dir}`);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (cause) {
      if (ticket) cache?.listed(dir, Object.assign(ticket, { stale: true }), []); // ends the read, remembers nothing
      if (isNotFound(cause) || isNotDir(cause)) return [];
      throw new UnavailableError(`Could not list ${dir}`, { cause });
    }
    if (cache && ticket) cache.listed(dir, ticket, names);
    return names;
  }

  async #hasAny(dir: string): Promise<boolean> {
    for (const name of await this.#readdir(dir).catch(() => [] as readonly string[])) {
      if (name.includes(TMP_MARK)) continue;
      if (!name.endsWith(DIR_SUFFIX) || (await this.#hasAny(join(dir, name)))) return true;
    }
    return false;
  }
}

const fsyncOnPool = promisify(fsync);

const isNotFound = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === "ENOENT";
const isNotDir = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === "ENOTDIR";

/** A read in flight; a write to what it reads makes it stale, and a stale read fills no memory. */
interface ReadTicket {
  stale: boolean;
}

/**
 * What a FileObjectStore with `cache` on remembers. A read only fills memory when no write to the
 * same key (or folder) started or ended while it was in flight, so a slow read never puts an older
 * document back over a newer one.
 */
class MemoryCache {
  /** key -> bytes, or null for "known absent". */
  readonly #objects: BytesCache;
  /** folder path -> the names in it. */
  readonly #listings = new Map<string, Set<string>>();
  readonly #dirs = new Set<string>();
  /** Reads in flight, by key or `dir:<path>`. */
  readonly #reads = new Map<string, Set<ReadTicket>>();
  readonly #queues = new Map<string, Promise<void>>();

  constructor(maxBytes: number) {
    this.#objects = new BytesCache(maxBytes);
  }

  /** Runs writes to one key one after another, in call order. */
  serially(key: string, write: () => Promise<void>): Promise<void> {
    const run = (this.#queues.get(key) ?? Promise.resolve()).then(write);
    const tail = run.catch(() => undefined);
    this.#queues.set(key, tail);
    void tail.then(() => {
      if (this.#queues.get(key) === tail) this.#queues.delete(key);
    });
    return run;
  }

  bytes(key: string): Uint8Array | null | undefined {
    return this.#objects.get(key);
  }

  listing(dir: string): readonly string[] | undefined {
    const names = this.#listings.get(dir);
    return names ? [...names] : undefined;
  }

  hasDir(dir: string): boolean {
    return this.#dirs.has(dir);
  }

  /** Starts a read of a key (or `dir:<path>`); pass the ticket back when it is done. */
  reading(id: string): ReadTicket {
    const ticket = { stale: false };
    const set = this.#reads.get(id) ?? new Set<ReadTicket>();
    this.#reads.set(id, set);
    set.add(ticket);
    return ticket;
  }

  read(key: string, ticket: ReadTicket, bytes: Uint8Array | undefined): void {
    if (this.#done(key, ticket)) this.#objects.set(key, bytes ?? null);
  }

  listed(dir: string, ticket: ReadTicket, names: readonly string[]): void {
    if (!this.#done(`dir:${dir}`, ticket)) return;
    this.#listings.set(dir, new Set(names));
    this.#dirs.add(dir);
  }

  /** A write to `key` is starting. */
  changing(key: string, path: string): void {
    this.#invalidate(key);
    this.#invalidate(`dir:${dirname(path)}`);
    this.#objects.delete(key);
  }

  written(key: string, path: string, bytes: Uint8Array, root: string): void {
    this.#invalidate(key);
    this.#objects.set(key, bytes);
    // The file and every folder on its way now exist: add each to its parent's known listing.
    let child = path;
    for (let dir = dirname(path); child !== root && dir.length >= root.length; dir = dirname(dir)) {
      this.#invalidate(`dir:${dir}`);
      this.#listings.get(dir)?.add(basename(child));
      this.#dirs.add(dir);
      child = dir;
    }
  }

  deleted(key: string, path: string): void {
    this.#invalidate(key);
    this.#objects.set(key, null);
    const dir = dirname(path);
    this.#invalidate(`dir:${dir}`);
    this.#listings.get(dir)?.delete(basename(path));
  }

  #done(id: string, ticket: ReadTicket): boolean {
    const set = this.#reads.get(id);
    set?.delete(ticket);
    if (set?.size === 0) this.#reads.delete(id);
    return !ticket.stale;
  }

  #invalidate(id: string): void {
    for (const ticket of this.#reads.get(id) ?? []) ticket.stale = true;
  }
}
