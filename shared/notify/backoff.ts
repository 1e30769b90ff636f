/**
 * When a failed delivery is tried again: exponential backoff with jitter, for at least
 * `retryForMs` from its first attempt (or its redrive), then it is dead. How to drive it:
 *
 *   const next = nextAttempt(DEFAULT_RETRY, { attempts, retryFrom, now, random });
 *   next === undefined ? dead : pending until next
 *
 * The delay after the n-th failed attempt is min(maxDelayMs, baseDelayMs * 2^(n-1)), scaled by a
 * random factor in [0.5, 1) ("equal jitter": never a burst of retries at the same instant, never
 * much earlier than the schedule). The give-up check comes after the delay: a delivery is only
 * dead when its next attempt would fall past `retryForMs`, so the last attempt is within one
 * delay of the hour, and the whole schedule lives in the record (it survives restarts).
 */
export interface RetrySchedule {
  /** How long a delivery is retried, from its first attempt (or its redrive). */
  retryForMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetrySchedule = {
  retryForMs: 60 * 60_000,
  baseDelayMs: 10_000,
  maxDelayMs: 10 * 60_000,
};

export function retryDelayMs(schedule: RetrySchedule, attempts: number, random: () => number): number {
  const exp = schedule.baseDelayMs * 2 ** Math.max(0, Math.min(attempts - 1, 30));
  const capped = Math.min(schedule.maxDelayMs, exp);
  return Math.round(capped * (0.5 + random() / 2));
}

/** The time of the next attempt after `attempts` failed ones, or undefined when it is time to give up. */
export function nextAttempt(
  schedule: RetrySchedule,
  at: { attempts: number; retryFrom: Date; now: Date; random: () => number },
): Date | undefined {
  const next = at.now.getTime() + retryDelayMs(schedule, at.attempts, at.random);
  const end = at.retryFrom.getTime() + schedule.retryForMs;
  if (at.now.getTime() >= end) return undefined;
  // The last try lands on the end of the window, not beyond it.
  return new Date(Math.min(next, end));
}
