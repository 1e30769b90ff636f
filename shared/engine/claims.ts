import { ConflictError } from "../errors.ts";
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
 * Its state lives in its data, not in the record's status: nothing lists claims by status, and a
 * record without one stays out of the status index (one index write less per claim, on SQLite
 * and on DynamoDB).
 */
type ClaimState = "held" | "done";
const claimRecord = (key: string, state: ClaimState, at: Date, holder?: string) => ({
  key,
  kind: "claim",
  updatedAt: at.toISOString(),
  data: holder ? { state, holder } : { state },
});
/** Claims written before the state moved to the data carry it as their status. */
const stateOf = (record: { status?: string; data: unknown }): unknown =>
  (record.data as { state?: unknown } | null)?.state ?? record.status;

export async function claim(deps: EngineDeps, key: string, staleMs: number): Promise<boolean> {
  const now = deps.clock();
  const record = claimRecord(key, "held", now, deps.soleWorker);
  try {
    await deps.state.transact([{ op: "put", record, expectedVersion: 0 }]);
    return true;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
  }
  const current = await deps.state.get(key);
  if (!current || stateOf(current) !== "held") return false;
  const holder = (current.data as { holder?: unknown } | null)?.holder;
  const leftByTheGone = deps.soleWorker !== undefined && holder !== deps.soleWorker;
  if (!leftByTheGone && now.getTime() - Date.parse(current.updatedAt) < staleMs) return false;
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
