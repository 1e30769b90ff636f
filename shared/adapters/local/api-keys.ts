import { closeSync, constants, fstatSync, openSync, readFileSync, unwatchFile, watchFile } from "node:fs";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import { ConfigError, ConflictError, UnavailableError } from "../../kernel/errors.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import {
  type ApiKeyEntry,
  ApiKeySchema,
  type Authenticated,
  authenticatedAs,
  bearerKeyHash,
  type KeyStore,
  keysToRevoke,
} from "../../ports/key-store.ts";

export type { Authenticated } from "../../ports/key-store.ts";
export { newApiKey } from "../../ports/key-store.ts";

/**
 * Who calls the HTTP and A2A entry points: each API key stands for one person or one remote agent
 * of one tenant, with roles. Only the key's sha256 is kept, so the file holds no secret:
 *
 *   { "keys": [
 *       { "id": "user_ada", "kind": "human", "tenant": "acme", "roles": ["admin"],
 *         "sha256": "<hex sha256 of the key>" },
 *       { "id": "agent_partner-planner", "kind": "agent", "tenant": "acme", "sha256": "..." } ] }
 *
 * A request names its key as `Authorization: Bearer <key>`. The tenant and roles it stands for are
 * what the entry points pass to the engine as the caller (policy and tenant boundary decide from
 * there); a request never chooses its own tenant.
 */
export const ApiKeysSchema = z.object({ keys: z.array(ApiKeySchema).max(10_000) }).strict();
export type ApiKeysFile = z.infer<typeof ApiKeysSchema>;

/**
 * The keys in memory: a KeyStore of its own (tests, and what the file adapter checks requests
 * against), kept current from the keys file by `reloadApiKeys` / `watchApiKeysFile`.
 */
export class ApiKeys implements KeyStore {
  #byHash: Map<string, ApiKeyEntry>;
  /** Why no request is let in (the keys file is not valid), or undefined when the keys are good. */
  #unusable: string | undefined;

  constructor(file: ApiKeysFile) {
    this.#byHash = byHash(file.keys);
  }

  /** Takes the keys of a changed file: new keys work, removed ones stop, from the next request on. */
  replace(file: ApiKeysFile): void {
    this.#byHash = byHash(file.keys);
    this.#unusable = undefined;
  }

  /**
   * Fails closed: no key works, and every authentication says why (UnavailableError), until the
   * next `replace`. For a keys file that cannot be read or is not valid: the keys it held before
   * may be the very ones its editor meant to revoke.
   */
  refuseAll(reason: string): void {
    this.#byHash = new Map();
    this.#unusable = reason;
  }

  /** Parses the keys; throws ConfigError naming each bad field and `source`. */
  static parse(raw: unknown, source = "the API keys"): ApiKeys {
    return new ApiKeys(parseApiKeys(raw, source));
  }

  /** The keys of a JSON file (ARBOR_API_KEYS_FILE); a missing file is a ConfigError too. */
  static load(file: string): ApiKeys {
    const read = readApiKeysFile(file);
    if (!read) throw new ConfigError(`There is no API keys file ${file}: create one with \`arbor keys add\``);
    return new ApiKeys(read);
  }

  get size(): number {
    return this.#byHash.size;
  }

  /**
   * Who an `Authorization` header stands for, or undefined (no header, not a bearer key, unknown
   * key). Keys are looked up by their sha256: how long a lookup takes says nothing about a key.
   */
  async authenticate(authorization: string | undefined | null): Promise<Authenticated | undefined> {
    if (this.#unusable !== undefined)
      throw new UnavailableError(
        `Arbor's API keys file is not valid (${this.#unusable}), so no key is accepted until it is fixed: ask the operator`,
      );
    const sha = bearerKeyHash(authorization);
    return sha === undefined ? undefined : this.lookup(sha);
  }

  async lookup(sha256: string): Promise<Authenticated | undefined> {
    if (this.#unusable !== undefined)
      throw new UnavailableError(
        `Arbor's API keys file is not valid (${this.#unusable}), so no key is accepted until it is fixed: ask the operator`,
      );
    const entry = this.#byHash.get(sha256);
    return entry ? authenticatedAs(entry) : undefined;
  }

  async list(tenant?: string): Promise<ApiKeyEntry[]> {
    return [...this.#byHash.values()].filter((k) => tenant === undefined || k.tenant === tenant);
  }

  async add(entry: ApiKeyEntry): Promise<void> {
    const checked = parseApiKeys({ keys: [entry] }, "The new key").keys[0] as ApiKeyEntry;
    if (this.#byHash.has(checked.sha256)) throw new ConflictError("That key is known already");
    this.#byHash.set(checked.sha256, checked);
  }

  async revoke(which: string, tenant?: string): Promise<ApiKeyEntry[]> {
    const gone = keysToRevoke([...this.#byHash.values()], which, tenant, "memory");
    for (const k of gone) this.#byHash.delete(k.sha256);
    return gone;
  }
}

/** Checks parsed JSON as a keys file; throws ConfigError naming each bad field and `source`. */
export function parseApiKeys(raw: unknown, source: string): ApiKeysFile {
  const parsed = ApiKeysSchema.safeParse(raw);
  if (!parsed.success)
    throw new ConfigError(`${source} are not valid: ${formatIssues(parsed.error).join("; ")}`);
  return parsed.data;
}

/** What a keys file holds: its keys, nothing (no file), or why it cannot be used (never its path). */
type KeysFileRead =
  | { kind: "keys"; file: ApiKeysFile }
  | { kind: "missing" }
  | { kind: "invalid"; reason: string };

/** Longest keys file read: 10,000 keys take about 2.5 MB. */
export const MAX_KEYS_FILE_BYTES = 16 * 1024 * 1024;

/**
 * The text of the keys file, or why it is not one: it must be a regular file (a FIFO or a device
 * put in its place, by a symlink say, would block the server's only thread on the read, for good),
 * of a bounded size, that no other local user may write (anyone who can would add a key).
 * Opened without blocking, then checked on the open descriptor (what is checked is what is read).
 */
function readKeysText(file: string): { text: string } | { missing: true } | { invalid: string } {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? { missing: true } : { invalid: `it cannot be read: ${code ?? "error"}` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { invalid: "it is not a regular file" };
    if (stat.size > MAX_KEYS_FILE_BYTES) return { invalid: `it is larger than ${MAX_KEYS_FILE_BYTES} bytes` };
    if ((stat.mode & 0o002) !== 0)
      return { invalid: "any local user may write it: make it 0600 (chmod 600), as `arbor keys add` does" };
    return { text: readFileSync(fd, "utf8") };
  } catch (cause) {
    return { invalid: `it cannot be read: ${(cause as NodeJS.ErrnoException).code ?? "error"}` };
  } finally {
    closeSync(fd);
  }
}

function readKeys(file: string): KeysFileRead {
  const read = readKeysText(file);
  if ("missing" in read) return { kind: "missing" };
  if ("invalid" in read) return { kind: "invalid", reason: read.invalid };
  const { text } = read;
  if (text.trim() === "") return { kind: "keys", file: { keys: [] } }; // emptied: no keys
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    return { kind: "invalid", reason: `it is not JSON: ${(cause as Error).message}` };
  }
  const parsed = ApiKeysSchema.safeParse(raw);
  return parsed.success
    ? { kind: "keys", file: parsed.data }
    : { kind: "invalid", reason: formatIssues(parsed.error).join("; ") };
}

/** The keys file, validated; undefined when there is none, no keys when it is empty. */
export function readApiKeysFile(file: string): ApiKeysFile | undefined {
  const read = readKeys(file);
  if (read.kind === "invalid")
    throw new ConfigError(`The API keys file ${file} is not valid (${read.reason}): fix or remove it`);
  return read.kind === "keys" ? read.file : undefined;
}

/** What a reload of the keys file found. */
export type KeysReload =
  | { state: "keys"; count: number }
  | { state: "none"; why: "gone" | "empty" }
  | { state: "invalid"; reason: string };

/**
 * Reads the keys file again and makes `keys` what it says, from the next request on:
 *   - valid with keys: those keys (a new tenant's `newTenants` hook runs first: its assistants);
 *   - gone, empty, or `{"keys": []}`: no key works (every request is 401);
 *   - not readable or not valid: fails closed (every request is 503 saying the file is not valid
 *     and why) until the file is valid again: no key the file may have meant to revoke works on.
 */
export async function reloadApiKeys(
  file: string,
  keys: ApiKeys,
  newTenants?: (tenants: readonly string[]) => Promise<void>,
): Promise<KeysReload> {
  const read = readKeys(file);
  if (read.kind === "invalid") {
    keys.refuseAll(read.reason);
    return { state: "invalid", reason: read.reason };
  }
  if (read.kind === "missing" || read.file.keys.length === 0) {
    keys.replace({ keys: [] });
    return { state: "none", why: read.kind === "missing" ? "gone" : "empty" };
  }
  try {
    await newTenants?.([...new Set(read.file.keys.map((k) => k.tenant))]);
  } finally {
    keys.replace(read.file); // removed keys stop even if a new tenant could not be set up
  }
  return { state: "keys", count: read.file.keys.length };
}

/**
 * Watches the keys file (a stat poll every `intervalMs`, default 1 s: it sees a file replaced by
 * rename, as `arbor keys add` writes it) and reloads it on every change (see reloadApiKeys),
 * saying in the log what it found. Returns the function that stops watching.
 */
export function watchApiKeysFile(
  file: string,
  keys: ApiKeys,
  options: {
    log: Pick<ArborLogger, "info" | "warn" | "error">;
    newTenants?: (tenants: readonly string[]) => Promise<void>;
    intervalMs?: number;
  },
): () => void {
  const { log } = options;
  let reloads = Promise.resolve();
  const reload = () => {
    reloads = reloads
      .then(() => reloadApiKeys(file, keys, options.newTenants))
      .then((found) => {
        if (found.state === "keys") log.info("API keys reloaded", { file, keys: found.count });
        else if (found.state === "none")
          log.warn(`The API keys file is ${found.why}: no key is accepted until it has some`, { file });
        else
          log.error("The API keys file is not valid: every request is refused until it is fixed", {
            file,
            reason: found.reason,
          });
      })
      .catch((error: unknown) =>
        log.error("The API keys file changed but its tenants cannot be set up", { file, error }),
      );
  };
  watchFile(file, { interval: options.intervalMs ?? 1000 }, reload);
  return () => unwatchFile(file, reload);
}

function byHash(keys: readonly ApiKeyEntry[]): Map<string, ApiKeyEntry> {
  return new Map(keys.map((k) => [k.sha256, k]));
}
