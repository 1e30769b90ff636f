import { ModelError, ValidationError } from "../../kernel/errors.ts";

/** Helpers shared by the remote embedders: input checks, normalisation, retries, a worker pool. */

export const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Refuses empty or blank texts (and texts over `maxChars`) before anything is sent. */
export function checkTexts(texts: readonly string[], maxChars = Number.POSITIVE_INFINITY): void {
  texts.forEach((t, i) => {
    if (typeof t !== "string" || t.trim() === "") {
      throw new ValidationError("Cannot embed an empty text", [`texts[${i}] is empty or blank`]);
    }
    if (t.length > maxChars) {
      throw new ValidationError(`Text too long to embed`, [
        `texts[${i}] has ${t.length} characters; at most ${maxChars}`,
      ]);
    }
  });
}

/** L2-normalises in float64 and returns float32; a zero or non-finite vector is a ModelError. */
export function toUnitVector(values: readonly number[], source: string): Float32Array {
  let norm = 0;
  for (const v of values) {
    if (!Number.isFinite(v)) throw new ModelError(`${source} returned a non-finite embedding value`);
    norm += v * v;
  }
  if (norm === 0) throw new ModelError(`${source} returned a zero embedding`);
  const f = 1 / Math.sqrt(norm);
  return Float32Array.from(values, (v) => v * f);
}

/** Exponential backoff with full jitter: attempt 1 waits up to base, attempt 2 up to 2 x base... */
export function backoffMs(attempt: number, baseMs: number, capMs = 10_000): number {
  return Math.round(Math.random() * Math.min(capMs, baseMs * 2 ** (attempt - 1)));
}

export type Attempt<T> =
  | { ok: true; value: T }
  | { ok: false; retry: boolean; error: Error; waitMs?: number };

/**
 * Runs `attempt` until it succeeds, fails for good, or `maxAttempts` is reached; then returns the
 * last error through `exhausted` (e.g. to wrap throttling in a ThrottledError).
 */
export async function withRetries<T>(
  maxAttempts: number,
  sleep: (ms: number) => Promise<void>,
  baseDelayMs: number,
  attempt: () => Promise<Attempt<T>>,
  exhausted: (last: Error, attempts: number) => Error,
): Promise<T> {
  for (let n = 1; ; n++) {
    const result = await attempt();
    if (result.ok) return result.value;
    if (!result.retry) throw result.error;
    if (n >= maxAttempts) throw exhausted(result.error, n);
    await sleep(result.waitMs ?? backoffMs(n, baseDelayMs));
  }
}

/** Maps `items` with at most `concurrency` calls in flight; stops starting new ones after a failure. */
export async function mapPool<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        out[i] = await fn(items[i] as T, i);
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, concurrency), items.length) }, worker));
  return out;
}
