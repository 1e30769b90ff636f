import { chmod, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import Database from "libsql";
import { ConflictError, UnavailableError } from "../../kernel/errors.ts";
import type { ApiKeyEntry, Authenticated, KeyStore } from "../../ports/key-store.ts";
import { keysToRevoke } from "../../ports/key-store.ts";
import { ApiKeys, type ApiKeysFile, parseApiKeys, readApiKeysFile } from "./api-keys.ts";
import { privateFile } from "./private-files.ts";

/**
 * The keys file of `arbor serve` as a KeyStore (ARBOR_API_KEYS_FILE, default
 * <dataDir>/api-keys.json; only sha256 hashes, mode 0600). Requests are checked against `keys`,
 * the keys in memory, which `watchApiKeysFile` keeps current (and fails closed while the file is
 * not valid, see api-keys.ts). `list` reads the file; `add` and `revoke` rewrite it whole and
 * rename it into place, then take its keys at once (the watcher then sees the same file).
 * Writes of one process go one after the other; a change by another process (`arbor keys`
 * beside a serve whose admin routes write, two `arbor keys` at once) waits for the file's write
 * lock (`<file>.lock`, see withWriteLock), so each reads what the one before it wrote: no add
 * is lost and no revoked key comes back.
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

  lookup(sha256: string): Promise<Authenticated | undefined> {
    return this.keys.lookup(sha256);
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
    const run = this.#writes.then(() =>
      withWriteLock(this.file, async () => {
        const { next, result } = change(readApiKeysFile(this.file)?.keys ?? []);
        const file: ApiKeysFile = { keys: next };
        await writeKeysFile(this.file, file);
        this.keys.replace(file);
        return result;
      }),
    );
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

/** How long a change waits for another process's change of the same file (each takes milliseconds). */
const LOCK_WAIT_MS = 10_000;

/**
 * Runs `fn` (read the file, change it, rename the new one into place) holding the file's write
 * lock across processes: SQLite's own file lock on `<file>.lock` (as the data folder's lock,
 * data-dir-lock.ts), which the kernel drops when its process ends however it ends, so a kill -9
 * leaves no stale lock. Waits for it without blocking the event loop, at most LOCK_WAIT_MS.
 */
async function withWriteLock<R>(file: string, fn: () => Promise<R>): Promise<R> {
  await mkdir(dirname(file), { recursive: true });
  privateFile(`${file}.lock`);
  const db = new Database(`${file}.lock`);
  try {
    db.exec("PRAGMA busy_timeout = 0");
    for (const started = Date.now(); ; ) {
      try {
        db.exec("BEGIN IMMEDIATE");
        break;
      } catch (error) {
        if ((error as { code?: string }).code !== "SQLITE_BUSY") throw error;
        if (Date.now() - started > LOCK_WAIT_MS)
          throw new UnavailableError(
            `The keys file ${file} is being changed by another process (its lock ${file}.lock is held): try again`,
          );
        await sleep(10 + Math.random() * 20);
      }
    }
    try {
      return await fn();
    } finally {
      db.exec("ROLLBACK");
    }
  } finally {
    db.close();
  }
}
