import { AsyncLocalStorage } from "node:async_hooks";
import { expiresAfter, RETENTION_MS } from "../domain/retention.ts";
import { ConflictError } from "../kernel/errors.ts";
import type { EngineDeps } from "./context.ts";

/**
 * A claim makes "do this once" hold across duplicate deliveries and concurrent workers: the first
 * to create the record wins. A claim older than `staleMs` whose work never finished may be taken
 * over (its holder crashed); a finished claim is never taken again.
 *
 * Where one process works alone on a store (`soleWorker`: a local data folder's lock), a claim
 * held by any other holder was left by a process that is gone (killed while it held it): it is
 * taken over at once, so work a crash interrupted moves on as soon as it is driven again, not once
 * the claim has gone stale.
 *
 * A claim is a lease: it says until when its holder may still be at work (`leaseUntil`), and is
 * free to take over from then on. That is `staleMs` after it was taken, or, inside a step that
 * knows when its invocation must end (a Lambda function's remaining time, see
 * `withinStepTime`), that end plus CLAIM_LEASE_MARGIN_MS, whichever comes first: a step killed
 * by its timeout leaves a claim that Lambda's retry (a minute later) takes over, instead of
 * finding it held and doing nothing until the watchdog comes.
 *
 * Its state lives in its data, not in the record's status: nothing lists claims by status, and a
 * record without one stays out of the status index (one index write less per claim, on SQLite
 * and on DynamoDB).
 */
type ClaimState = "held" | "done";
interface ClaimData {
  state: ClaimState;
  holder?: string;
  /** ISO 8601; absent in claims written before leases (they end `staleMs` after `updatedAt`). */
  leaseUntil?: string;
}
const claimRecord = (key: string, state: ClaimState, at: Date, extra: Omit<ClaimData, "state"> = {}) => ({
  key,
  kind: "claim",
  updatedAt: at.toISOString(),
  // Long after any repeat of its work could come (domain/retention.ts): then the store may drop it.
  expiresAt: expiresAfter(at, RETENTION_MS.claim),
  data: { state, ...extra } satisfies ClaimData,
});
/** Claims written before the state moved to the data carry it as their status. */
const stateOf = (record: { status?: string; data: unknown }): unknown =>
  (record.data as { state?: unknown } | null)?.state ?? record.status;

/** How long a claim outlives the end of the invocation that took it (clock skew, a slow last write). */
export const CLAIM_LEASE_MARGIN_MS = 30_000;

const stepTime = new AsyncLocalStorage<() => number>();

/**
 * Runs `step` knowing how much time its invocation has left (`remainingMs`, e.g. the Lambda
 * context's getRemainingTimeInMillis): claims taken inside it end soon after that time runs out.
 */
export function withinStepTime<T>(remainingMs: () => number, step: () => Promise<T>): Promise<T> {
  return stepTime.run(remainingMs, step);
}

/** How long a claim taken now may be held. */
export function leaseMs(staleMs: number): number {
  const remaining = stepTime.getStore()?.();
  return remaining === undefined || !Number.isFinite(remaining)
    ? staleMs
    : Math.min(staleMs, Math.max(0, remaining) + CLAIM_LEASE_MARGIN_MS);
}

export async function claim(deps: EngineDeps, key: string, staleMs: number): Promise<boolean> {
  const now = deps.clock();
  const leaseUntil = new Date(now.getTime() + leaseMs(staleMs)).toISOString();
  const record = claimRecord(key, "held", now, {
    ...(deps.soleWorker ? { holder: deps.soleWorker } : {}),
    leaseUntil,
  });
  try {
    await deps.state.transact([{ op: "put", record, expectedVersion: 0 }]);
    return true;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
  }
  const current = await deps.state.get(key);
  if (!current || stateOf(current) !== "held") return false;
  const data = (current.data ?? {}) as Partial<ClaimData>;
  const leftByTheGone = deps.soleWorker !== undefined && data.holder !== deps.soleWorker;
  const ends =
    typeof data.leaseUntil === "string"
      ? Date.parse(data.leaseUntil)
      : Date.parse(current.updatedAt) + staleMs;
  if (!leftByTheGone && now.getTime() < ends) return false;
  try {
    await deps.state.transact([{ op: "put", record, expectedVersion: current.version }]);
    return true;
  } catch (e) {
    if (e instanceof ConflictError) return false;
    throw e;
  }
}

/** Marks a claim's work as finished: it will never be taken over. */
export async function finishClaim(deps: EngineDeps, key: string): Promise<void> {
  const current = await deps.state.get(key);
  if (!current || stateOf(current) === "done") return;
  await deps.state
    .transact([
      { op: "put", record: claimRecord(key, "done", deps.clock()), expectedVersion: current.version },
    ])
    .catch((e: unknown) => {
      if (!(e instanceof ConflictError)) throw e;
    });
}

/**
 * Lets go of a claim still held, its work not done (it waits for a person, or failed): whoever
 * drives the work next takes it at once, not when the lease ends. A finished claim stays finished.
 */
export async function releaseClaim(deps: EngineDeps, key: string): Promise<void> {
  const current = await deps.state.get(key);
  if (!current || stateOf(current) !== "held") return;
  const now = deps.clock();
  await deps.state
    .transact([
      {
        op: "put",
        record: claimRecord(key, "held", now, { leaseUntil: now.toISOString() }),
        expectedVersion: current.version,
      },
    ])
    .catch((e: unknown) => {
      if (!(e instanceof ConflictError)) throw e;
    });
}

/** Calls being run in this process, by the store it is the sole worker of (claimCall). */
const callsHere = new WeakMap<object, Set<string>>();

/**
 * Takes the claim on running one call (released by releaseCall). A process that is its store's
 * sole worker (a local data folder's lock) holds it in memory: every step that could run the call
 * runs in this process, and a process that took over after a crash starts with none held. Others
 * (a Lambda function) hold a claim on record, which a crash leaves to its lease.
 */
export async function claimCall(deps: EngineDeps, key: string, staleMs: number): Promise<boolean> {
  if (deps.soleWorker === undefined) return claim(deps, key, staleMs);
  let held = callsHere.get(deps.state);
  if (!held) {
    held = new Set();
    callsHere.set(deps.state, held);
  }
  if (held.has(key)) return false;
  held.add(key);
  return true;
}

/**
 * Lets go of a call's claim: `done` once its result is written (a claim on record then stays, as a
 * finished call is never run again: its result is there), else (it waits, or failed) for whoever
 * drives it next to take at once.
 */
export async function releaseCall(deps: EngineDeps, key: string, done: boolean): Promise<void> {
  if (deps.soleWorker !== undefined) callsHere.get(deps.state)?.delete(key);
  else if (!done) await releaseClaim(deps, key);
}
