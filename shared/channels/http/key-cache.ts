import { trimOldest } from "../../domain/bounded-map.ts";
import { type ApiKeyEntry, type Authenticated, bearerKeyHash, type KeyStore } from "../../ports/key-store.ts";

/**
 * A short cache in front of a KeyStore whose lookups cost a read (the state table on AWS): each
 * key's answer, known or unknown, is kept for `ttlMs` from when it was read, so a busy caller
 * costs one read per TTL and a revoked key (or one added in another process) counts within it.
 * Unknown keys are kept too (a flood of made-up keys costs one read each, once), in a map of at
 * most `maxEntries`, oldest dropped first. A failed lookup is not kept. Concurrent requests with
 * one key share one read. Writes through this store drop what it kept of the keys they touch, so
 * in this process they count at once. The clock (milliseconds) is injected.
 */
export const DEFAULT_KEY_CACHE_TTL_MS = 30_000;

interface Entry {
  until: number;
  who: Promise<Authenticated | undefined>;
}

export class CachedKeyStore implements KeyStore {
  readonly #inner: KeyStore;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #max: number;
  readonly #byHash = new Map<string, Entry>();

  constructor(inner: KeyStore, options: { ttlMs?: number; now?: () => number; maxEntries?: number } = {}) {
    this.#inner = inner;
    this.#ttlMs = options.ttlMs ?? DEFAULT_KEY_CACHE_TTL_MS;
    this.#now = options.now ?? Date.now;
    this.#max = options.maxEntries ?? 10_000;
  }

  authenticate(authorization: string | undefined | null): Promise<Authenticated | undefined> {
    const sha = bearerKeyHash(authorization);
    if (sha === undefined) return Promise.resolve(undefined); // no key: nothing to look up
    return this.lookup(sha);
  }

  /** Kept as `authenticate` keeps it: a key and its hash share one entry. */
  lookup(sha: string): Promise<Authenticated | undefined> {
    const now = this.#now();
    const kept = this.#byHash.get(sha);
    if (kept && kept.until > now) return kept.who;
    const who = this.#inner.lookup(sha);
    const entry = { until: now + this.#ttlMs, who };
    this.#byHash.delete(sha); // re-inserted last: the map stays ordered by age
    this.#byHash.set(sha, entry);
    trimOldest(this.#byHash, this.#max);
    who.catch(() => {
      if (this.#byHash.get(sha) === entry) this.#byHash.delete(sha);
    });
    return who;
  }

  list(tenant?: string): Promise<ApiKeyEntry[]> {
    return this.#inner.list(tenant);
  }

  async add(entry: ApiKeyEntry): Promise<void> {
    await this.#inner.add(entry);
    this.#byHash.delete(entry.sha256);
  }

  async revoke(which: string, tenant?: string): Promise<ApiKeyEntry[]> {
    const gone = await this.#inner.revoke(which, tenant);
    for (const k of gone) this.#byHash.delete(k.sha256);
    return gone;
  }
}
