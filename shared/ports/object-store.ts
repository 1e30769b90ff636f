import { ValidationError } from "../kernel/errors.ts";

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

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
const FORBIDDEN_CHARACTERS = /[\u0000-\u001f\u007f\\]/;
/** An empty, "." or ".." segment: between slashes, or at either end. */
const BAD_SEGMENT = /(?:^|\/)\.{0,2}(?:\/|$)/;

/** Rejects keys that would behave differently across adapters (or escape a folder). */
export function assertValidKey(key: string): void {
  // The common case first, without building anything: every object read and write checks its key.
  const valid =
    typeof key === "string" &&
    key.length > 0 &&
    (key.length * 3 <= MAX_KEY_BYTES || Buffer.byteLength(key) <= MAX_KEY_BYTES) &&
    !key.startsWith("/") &&
    !FORBIDDEN_CHARACTERS.test(key) &&
    !BAD_SEGMENT.test(key);
  if (valid) return;
  const problems: string[] = [];
  if (typeof key !== "string" || key.length === 0) problems.push("must be a non-empty string");
  else {
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) problems.push(`must be at most ${MAX_KEY_BYTES} bytes`);
    if (key.startsWith("/")) problems.push("must not start with /");
    if (FORBIDDEN_CHARACTERS.test(key)) problems.push("must not contain control characters or backslashes");
    if (BAD_SEGMENT.test(key)) problems.push("must not contain empty, . or .. segments");
  }
  throw new ValidationError(`Invalid object key ${JSON.stringify(key)}`, problems);
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

/** An extension as findByExtension takes it: letters and digits, without the dot. */
const EXTENSION = /^[A-Za-z0-9]{1,16}$/;

/**
 * Keys under `prefix`, at any depth, that end in `.<extension>` (exactly: `json` is not `JSON`),
 * in key order, at most `limit` (default 1000). No store lists by suffix (S3 cannot): this reads
 * the prefix's listing page by page and keeps the matches, the same way on every adapter.
 */
export async function findByExtension(
  store: ObjectStore,
  prefix: string,
  extension: string,
  options: { limit?: number } = {},
): Promise<string[]> {
  if (!EXTENSION.test(extension))
    throw new ValidationError(`Invalid extension ${JSON.stringify(extension)}`, [
      "1 to 16 letters or digits, without the dot: json, pdf, md",
    ]);
  const limit = options.limit ?? 1000;
  const suffix = `.${extension}`;
  const found: string[] = [];
  for await (const page of listAll(store, prefix)) {
    for (const key of page.keys) if (key.endsWith(suffix)) found.push(key);
    if (found.length >= limit) break;
  }
  return found.slice(0, limit);
}
