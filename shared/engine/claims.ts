import { ConflictError } from "../errors.ts";
import type { EngineDeps } from "./context.ts";

/**
 * A claim makes "do this once" hold across duplicate deliveries and concurrent workers: the first
 * to create the record wins. A claim older than `staleMs` whose work never finished may be taken
 * over (its holder crashed); a finished claim is never taken again.
 */
export async function claim(deps: EngineDeps, key: string, staleMs: number): Promise<boolean> {
  const now = deps.clock();
  const record = { key, kind: "claim", status: "held", updatedAt: now.toISOString(), data: {} };
  try {
    await deps.state.transact([{ op: "put", record, expectedVersion: 0 }]);
    return true;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
  }
  const current = await deps.state.get(key);
  if (current?.status !== "held") return false;
  if (now.getTime() - Date.parse(current.updatedAt) < staleMs) return false;
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
  if (!current || current.status === "done") return;
  await deps.state
    .transact([
      {
        op: "put",
        record: { key, kind: "claim", status: "done", updatedAt: deps.clock().toISOString(), data: {} },
        expectedVersion: current.version,
      },
    ])
    .catch((e: unknown) => {
      if (!(e instanceof ConflictError)) throw e;
    });
}
