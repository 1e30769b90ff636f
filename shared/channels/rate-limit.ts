import type { RateLimit, RateLimits } from "../config.ts";
import type { Authenticated } from "./api-keys.ts";

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
  /** Which bucket is empty: the key's own, or its tenant's. */
  scope: "key" | "tenant";
  /** Whole seconds until the request would get through (Retry-After). */
  retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export class RateLimiter {
  readonly #limits: RateLimits;
  readonly #now: () => number;
  readonly #buckets = new Map<string, Bucket>();

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

  #refilled(id: string, limit: RateLimit, now: number): Bucket {
    const bucket = this.#buckets.get(id) ?? { tokens: limit.burst, at: now };
    const elapsed = Math.max(0, now - bucket.at) / 1000;
    bucket.tokens = Math.min(limit.burst, bucket.tokens + elapsed * limit.perSecond);
    bucket.at = now;
    this.#buckets.set(id, bucket);
    return bucket;
  }
}

/** What a channel says to a throttled caller. */
export const throttledMessage = (t: Throttled) =>
  `Too many requests ${t.scope === "key" ? "with this API key" : "from this tenant"}: try again in ${t.retryAfterSeconds} s`;
