import { chmod, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { ConflictError } from "../../kernel/errors.ts";
import type { ApiKeyEntry, Authenticated, KeyStore } from "../../ports/key-store.ts";
import { keysToRevoke } from "../../ports/key-store.ts";
import { ApiKeys, type ApiKeysFile, parseApiKeys, readApiKeysFile } from "./api-keys.ts";

/**
 * The keys file of `arbor serve` as a KeyStore (ARBOR_API_KEYS_FILE, default
 * <dataDir>/api-keys.json; only sha256 hashes, mode 0600). Requests are checked against `keys`,
 * the keys in memory, which `watchApiKeysFile` keeps current (and fails closed while the file is
 * not valid, see api-keys.ts). `list` reads the file; `add` and `revoke` rewrite it whole and
 * rename it into place, then take its keys at once (the watcher then sees the same file).
 * Writes of one process go one after the other; `arbor keys` in another process writes the same
 * way, and the last rename wins.
 */
export class FileKeyStore implements KeyStore {
  readonly file: string;
  /** What requests are checked against. */
  readonly keys: ApiKeys;
  #writes: Promise<unknown> = Promise.resolve();

  constructor(file: string, keys?: ApiKeys) {
    this.file = file;
    this.keys = keys ?? new ApiKeys(readApiKeysFile(file) ?? { keys: [] });
  }

  authenticate(authorization: string | undefined | null): Promise<Authenticated | undefined> {
    return this.keys.authenticate(authorization);
  }

  async list(tenant?: string): Promise<ApiKeyEntry[]> {
    const keys = readApiKeysFile(this.file)?.keys ?? [];
    return keys.filter((k) => tenant === undefined || k.tenant === tenant);
  }

  add(entry: ApiKeyEntry): Promise<void> {
    return this.#write((keys) => {
      const checked = parseApiKeys({ keys: [entry] }, "The new key").keys[0] as ApiKeyEntry;
      if (keys.some((k) => k.sha256 === checked.sha256)) throw new ConflictError("That key is known already");
      return { next: [...keys, checked], result: undefined };
    });
  }

  revoke(which: string, tenant?: string): Promise<ApiKeyEntry[]> {
    return this.#write((keys) => {
      const gone = keysToRevoke(keys, which, tenant, this.file);
      return { next: keys.filter((k) => !gone.includes(k)), result: gone };
    });
  }

  /** Reads the file, changes its keys, writes it; one change at a time. */
  #write<R>(change: (keys: ApiKeyEntry[]) => { next: ApiKeyEntry[]; result: R }): Promise<R> {
    const run = this.#writes.then(async () => {
      const { next, result } = change(readApiKeysFile(this.file)?.keys ?? []);
      const file: ApiKeysFile = { keys: next };
      await writeKeysFile(this.file, file);
      this.keys.replace(file);
      return result;
    });
    this.#writes = run.catch(() => undefined);
    return run;
  }
}

/** Written whole and renamed into place, readable by its owner only. */
export async function writeKeysFile(file: string, keys: ApiKeysFile): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    await writeFile(temporary, `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
    await chmod(temporary, 0o600);
    await rename(temporary, file);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}
