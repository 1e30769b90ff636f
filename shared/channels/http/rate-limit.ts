import type { Authenticated } from "../../ports/key-store.ts";

/** A token bucket: `burst` requests at once, refilled at `perSecond` (below). */
export interface RateLimit {
  perSecond: number;
  burst: number;
}
/** Per API key and per tenant; an absent one is no limit. */
export interface RateLimits {
  perKey?: RateLimit;
  perTenant?: RateLimit;
  /** Event streams open at once (SSE and A2A streams), per key and per tenant (default 20 and 100). */
  streams?: { perKey: number; perTenant: number };
  /**
   * Unknown API keys per client address before its requests get 429 (default 30 at once, 0.5 a
   * second). Loopback addresses are not counted unless `countLoopback`: behind a proxy on the same
   * machine every client has the proxy's address, and one flood would lock every caller out.
   */
  unknownKeys?: RateLimit & { countLoopback?: boolean };
}

/**
 * How many requests a key, and all the keys of one tenant together, may make: a token bucket
 * each (`burst` requests at once, refilled at `perSecond`). A request takes one token from its
 * key's bucket and one from its tenant's, or none when either is empty: it is then refused
 * (429 THROTTLED with Retry-After, by the channel) and costs the tenant nothing.
 *
 * Kept in memory, per process: right for `arbor serve` (one process per data folder). Several
 * processes would each allow the full rate; on AWS, API Gateway's throttling stands in front.
 * The clock is injected (milliseconds), so tests decide when time passes.
 */
export interface Throttled {
  /** Which bucket is empty: the key's own, its tenant's, or a client address's that keeps sending unknown keys. */
  scope: "key" | "tenant" | "source";
  /** Whole seconds until the request would get through (Retry-After). */
  retryAfterSeconds: number;
  /** Set when what is full is the streams a key (or tenant) may hold open at once: that many. */
  streams?: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export class RateLimiter {
  readonly #limits: RateLimits;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();
  /** Streams open now, per key and per tenant. */
  readonly #open = new Map<string, number>();
  /** Unknown keys per client address (oldest first, at most MAX_SOURCES kept). */
  readonly #unknown = new Map<string, Bucket>();

  constructor(limits: RateLimits, now: () => number = Date.now) {
    this.#limits = limits;
    this.#now = now;
  }

  /** Takes a request of `who` from its buckets; undefined when it may go on, else why not and for how long. */
  take(who: Authenticated): Throttled | undefined {
    const now = this.#now();
    const { tenant } = who.caller;
    const checks: [Throttled["scope"], string, RateLimit | undefined][] = [
      ["key", `key:${tenant}:${who.actor.id}`, this.#limits.perKey],
      ["tenant", `tenant:${tenant}`, this.#limits.perTenant],
    ];
    const buckets: Bucket[] = [];
    for (const [scope, id, limit] of checks) {
      if (!limit) continue;
      const bucket = this.#refilled(id, limit, now);
      if (bucket.tokens < 1)
        return { scope, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond)) };
      buckets.push(bucket);
    }
    for (const bucket of buckets) bucket.tokens -= 1;
    return undefined;
  }

  /**
   * Opens an event stream of `who` (HTTP `text/event-stream`, A2A streams): an open stream costs
   * nothing per second, so the buckets above do not bound how many a key holds; this does (each
   * one is a connection, a follower and its rechecks). Returns the function that closes it (call
   * it once, when the stream ends), or why not: a key or tenant at its limit.
   */
  openStream(who: Authenticated): (() => void) | Throttled {
    const limits = this.#limits.streams ?? DEFAULT_STREAM_LIMITS;
    const ids: [Throttled["scope"], string, number][] = [
      ["key", `key:${who.caller.tenant}:${who.actor.id}`, limits.perKey],
      ["tenant", `tenant:${who.caller.tenant}`, limits.perTenant],
    ];
    for (const [scope, id, max] of ids)
      if ((this.#open.get(id) ?? 0) >= max)
        return { scope, retryAfterSeconds: STREAM_RETRY_SECONDS, streams: max };
    for (const [, id] of ids) this.#open.set(id, (this.#open.get(id) ?? 0) + 1);
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      for (const [, id] of ids) {
        const left = (this.#open.get(id) ?? 1) - 1;
        if (left > 0) this.#open.set(id, left);
        else this.#open.delete(id);
      }
    };
  }

  /**
   * Whether `source` (a client's address) has sent too many unknown keys lately: then its requests
   * are refused (429) before any key is looked up, so a flood of made-up keys costs no store read.
   * Check it before authenticating; count each unknown key with `unknownKey`.
   */
  unknownKeysFrom(source: string | undefined): Throttled | undefined {
    if (!this.#counted(source)) return undefined;
    const limit = this.#limits.unknownKeys ?? DEFAULT_UNKNOWN_KEYS;
    const bucket = this.#unknown.get(source);
    if (!bucket) return undefined;
    refill(bucket, limit, this.#now());
    if (bucket.tokens >= 1) return undefined;
    return {
      scope: "source",
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / limit.perSecond)),
    };
  }

  /** Counts an unknown (or missing) key sent from `source`. */
  unknownKey(source: string | undefined): void {
    if (!this.#counted(source)) return;
    const limit = this.#limits.unknownKeys ?? DEFAULT_UNKNOWN_KEYS;
    const now = this.#now();
    const bucket = this.#unknown.get(source) ?? { tokens: limit.burst, at: now };
    refill(bucket, limit, now);
    bucket.tokens = Math.max(0, bucket.tokens - 1);
    this.#unknown.delete(source);
    this.#unknown.set(source, bucket);
    // Addresses that stopped long ago are forgotten first (a full bucket is the same as none).
    while (this.#unknown.size > MAX_SOURCES)
      this.#unknown.delete(this.#unknown.keys().next().value as string);
  }

  /** Whether unknown keys from `source` are counted (loopback only when configured: see RateLimits.unknownKeys). */
  #counted(source: string | undefined): source is string {
    if (source === undefined) return false;
    return this.#limits.unknownKeys?.countLoopback === true || !isLoopback(source);
  }

  #refilled(id: string, limit: RateLimit, now: number): Bucket {
    const bucket = this.#buckets.get(id) ?? { tokens: limit.burst, at: now };
    const elapsed = Math.max(0, now - bucket.at) / 1000;
    bucket.tokens = Math.min(limit.burst, bucket.tokens + elapsed * limit.perSecond);
    bucket.at = now;
    this.#buckets.set(id, bucket);
    return bucket;
  }
}

const isLoopback = (address: string) =>
  address === "::1" || address.startsWith("127.") || address.startsWith("::ffff:127.");

function refill(bucket: Bucket, limit: RateLimit, now: number): void {
  const elapsed = Math.max(0, now - bucket.at) / 1000;
  bucket.tokens = Math.min(limit.burst, bucket.tokens + elapsed * limit.perSecond);
  bucket.at = now;
}

/**
 * Unknown keys one client address may send (RateLimits.unknownKeys): 30 at once, then one every 2
 * seconds. A person who mistyped a key never gets near it; a script trying keys is slowed to a crawl.
 */
export const DEFAULT_UNKNOWN_KEYS: RateLimit = { burst: 30, perSecond: 0.5 };
/** Client addresses whose unknown keys are counted at once (the oldest are let go). */
const MAX_SOURCES = 10_000;

/** Event streams a key, and a tenant, may hold open at once unless configured (RateLimits.streams). */
export const DEFAULT_STREAM_LIMITS = { perKey: 20, perTenant: 100 } as const;
/** What a refused stream is told to wait before it tries again. */
const STREAM_RETRY_SECONDS = 5;

/** Where a stream takes its place: RateLimiter.openStream (a stand-in in tests). */
export type StreamSlots = Pick<RateLimiter, "openStream">;

/** What a channel says to a throttled caller. */
export const throttledMessage = (t: Throttled) =>
  t.streams !== undefined
    ? `Too many event streams open ${t.scope === "key" ? "with this API key" : "in this tenant"} (at most ${t.streams} at once): close one, or try again in ${t.retryAfterSeconds} s`
    : t.scope === "source"
      ? `Too many requests with unknown API keys from this address: check the key (\`arbor keys ls\`), and try again in ${t.retryAfterSeconds} s`
      : `Too many requests ${t.scope === "key" ? "with this API key" : "from this tenant"}: try again in ${t.retryAfterSeconds} s`;
