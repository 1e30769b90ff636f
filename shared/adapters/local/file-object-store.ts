import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { UnavailableError } from "../../errors.ts";
import {
  assertValidKey,
  compareKeys,
  type ListOptions,
  type ListPage,
  type ObjectStore,
} from "../../ports/object-store.ts";

/**
 * Objects as files under a root folder, the key as the path. Each key segment is kept as is when
 * it only uses `A-Z a-z 0-9 . _ : -` (every URN does) and percent-encoded otherwise. Folders get
 * a `+` suffix so that, as on S3, `a/b` and `a/b/c` can both exist:
 *
 *   cld:common.Tenant.local.json
 *   cld:common.Tenant.local+/common.Conversation.c1.json
 *
 * Writes are atomic (temporary file, fsync, rename), so a crash never leaves half a document.
 */
export interface FileObjectStoreOptions {
  root: string;
  /** fsync each file before it is renamed into place (default true). */
  durable?: boolean;
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

  constructor(options: FileObjectStoreOptions) {
    this.#root = options.root;
    this.#durable = options.durable ?? true;
  }

  #path(key: string): string {
    assertValidKey(key);
    const segments = key.split("/");
    const last = segments.pop() as string;
    return join(this.#root, ...segments.map((s) => encodeSegment(s) + DIR_SUFFIX), encodeSegment(last));
  }

  async put(key: string, body: Uint8Array | string): Promise<void> {
    const path = this.#path(key);
    const tmp = `${path}${TMP_MARK}${randomBytes(6).toString("hex")}`;
    try {
      await mkdir(dirname(path), { recursive: true });
      const handle = await open(tmp, "w");
      try {
        await handle.writeFile(body);
        if (this.#durable) await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(tmp, path);
    } catch (cause) {
      await unlink(tmp).catch(() => undefined);
      throw new UnavailableError(
        `Could not write ${key} under ${this.#root}; check that the folder is writable`,
        {
          cause,
        },
      );
    }
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      return new Uint8Array(await readFile(this.#path(key)));
    } catch (cause) {
      if (isNotFound(cause)) return undefined;
      throw new UnavailableError(`Could not read ${key} under ${this.#root}`, { cause });
    }
  }

  getMany(keys: readonly string[]): Promise<(Uint8Array | undefined)[]> {
    return Promise.all(keys.map((k) => this.get(k)));
  }

  async delete(key: string): Promise<void> {
    await rm(this.#path(key), { force: true });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const limit = Math.max(1, Math.min(options.limit ?? 1000, 1000));
    const after =
      options.cursor === undefined ? undefined : Buffer.from(options.cursor, "base64url").toString();
    const { delimiter } = options;

    // Start the walk at the deepest folder the prefix names in full.
    const cut = prefix.lastIndexOf("/");
    const base = cut < 0 ? "" : prefix.slice(0, cut + 1);
    const dir = base === "" ? this.#root : this.#path(`${base}x`).slice(0, -1);
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
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (cause) {
      if (isNotFound(cause) || isNotDir(cause)) return;
      throw new UnavailableError(`Could not list ${dir}`, { cause });
    }
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

  async #hasAny(dir: string): Promise<boolean> {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (name.includes(TMP_MARK)) continue;
      if (!name.endsWith(DIR_SUFFIX) || (await this.#hasAny(join(dir, name)))) return true;
    }
    return false;
  }
}

const isNotFound = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === "ENOENT";
const isNotDir = (e: unknown): boolean => (e as NodeJS.ErrnoException)?.code === "ENOTDIR";
