import { setTimeout as sleep } from "node:timers/promises";

/**
 * Waits for something that happens on its own time (a delivery, a step, a process): polls `check`
 * every `everyMs` until it gives a value other than false, undefined or null, and returns that
 * value. Past `waitMs` it throws, naming `what` was awaited. The tests' one way to wait.
 */
export async function until<T>(
  what: string,
  check: () => T | Promise<T>,
  waitMs = 20_000,
  everyMs = 10,
): Promise<Exclude<T, false | undefined | null>> {
  const end = Date.now() + waitMs;
  for (;;) {
    const value = await check();
    if (value !== false && value !== undefined && value !== null)
      return value as Exclude<T, false | undefined | null>;
    if (Date.now() > end) throw new Error(`Still waiting for: ${what} (${waitMs} ms)`);
    await sleep(everyMs);
  }
}

/** Reads with `read` until `done` says the value is the one awaited, and returns it (see `until`). */
export function untilRead<T>(
  what: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  waitMs = 20_000,
): Promise<T> {
  return until(
    what,
    async () => {
      const value = await read();
      return done(value) ? { value } : undefined;
    },
    waitMs,
  ).then((got) => got.value);
}

/**
 * Reads with `probe` until `done` holds for its result, and returns it; past `timeoutMs`, returns
 * the last result instead of throwing, for the assertion that follows to show it.
 */
export async function eventually<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(100);
  }
}
