import { ValidationError } from "../errors.ts";

/**
 * Object store port: bytes under string keys, listed by prefix in key order.
 * Adapters: files under a data folder (local), S3 (AWS).
 */
export interface ListOptions {
  /** Group keys by the first occurrence of this string after the prefix (S3's Delimiter). */
  delimiter?: string;
  /** Page size; adapters may return fewer. Default 1000. */
  limit?: number;
  /** Opaque cursor from the previous page. */
  cursor?: string;
}

export interface ListPage {
  /** Keys on this page, ascending in UTF-8 byte order. */
  keys: string[];
  /** With a delimiter: the distinct "folders" below the prefix, ascending. */
  prefixes: string[];
  /** Present when there is another page. */
  cursor?: string;
}

export interface ObjectStore {
  put(key: string, body: Uint8Array | string, options?: { contentType?: string }): Promise<void>;
  /** The bytes, or undefined when there is no such key. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** Many keys at once, in the order asked; undefined where missing. */
  getMany(keys: readonly string[]): Promise<(Uint8Array | undefined)[]>;
  list(prefix: string, options?: ListOptions): Promise<ListPage>;
  /** Idempotent: deleting a missing key is not an error. */
  delete(key: string): Promise<void>;
}

/** S3's limit on key length; we hold every adapter to it. */
export const MAX_KEY_BYTES = 1024;

/** Rejects keys that would behave differently across adapters (or escape a folder). */
export function assertValidKey(key: string): void {
  const problems: string[] = [];
  if (typeof key !== "string" || key.length === 0) problems.push("must be a non-empty string");
  else {
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) problems.push(`must be at most ${MAX_KEY_BYTES} bytes`);
    if (key.startsWith("/")) problems.push("must not start with /");
    // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
    if (/[\u0000-\u001f\u007f\\]/.test(key))
      problems.push("must not contain control characters or backslashes");
    if (key.split("/").some((s) => s === "" || s === "." || s === ".."))
      problems.push("must not contain empty, . or .. segments");
  }
  if (problems.length) throw new ValidationError(`Invalid object key ${JSON.stringify(key)}`, problems);
}

/** Byte-order comparison of keys (what S3 uses), independent of locale. */
export const compareKeys = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Walks every page of a listing. */
export async function* listAll(
  store: ObjectStore,
  prefix: string,
  options: Omit<ListOptions, "cursor"> = {},
): AsyncGenerator<ListPage> {
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, cursor === undefined ? options : { ...options, cursor });
    yield page;
    cursor = page.cursor;
  } while (cursor !== undefined);
}

/** Every key under a prefix, across pages. */
export async function listAllKeys(
  store: ObjectStore,
  prefix: string,
  options: Omit<ListOptions, "cursor"> = {},
): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of listAll(store, prefix, options)) keys.push(...page.keys);
  return keys;
}
