import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStateStore } from "../../../shared/adapters/local/sqlite-state-store.ts";
import { CLAIM_LEASE_MARGIN_MS, claim, finishClaim, withinStepTime } from "../../../shared/engine/claims.ts";
import type { EngineDeps } from "../../../shared/engine/context.ts";

describe("claims", () => {
  let store: SqliteStateStore;
  let now: number;
  let deps: EngineDeps;
  beforeEach(() => {
    store = new SqliteStateStore({ path: ":memory:" });
    now = Date.parse("2026-01-01T00:00:00.000Z");
    // A claim needs only the state store and the clock.
    deps = { state: store, clock: () => new Date(now) } as unknown as EngineDeps;
  });
  afterEach(() => store.close());

  it("is won once; a stale unfinished claim may be taken over, a finished one never", async () => {
    expect(await claim(deps, "turn#t#1", 1000)).toBe(true);
    expect(await claim(deps, "turn#t#1", 1000)).toBe(false); // held and fresh
    now += 1001;
    expect(await claim(deps, "turn#t#1", 1000)).toBe(true); // its holder is presumed dead
    await finishClaim(deps, "turn#t#1");
    now += 10_000;
    expect(await claim(deps, "turn#t#1", 1000)).toBe(false);
  });

  it("keeps its state in its data, so claims stay out of the status index", async () => {
    await claim(deps, "eval#t#0", 1000);
    const held = await store.get("eval#t#0");
    expect(held).toMatchObject({ kind: "claim", data: { state: "held" } });
    expect(held?.status).toBeUndefined();
    expect((await store.byStatus("claim", "held")).items).toEqual([]);
  });

  it("reads claims written with their state as the status", async () => {
    const at = new Date(now).toISOString();
    await store.transact([
      {
        op: "put",
        record: { key: "old-held", kind: "claim", status: "held", updatedAt: at, data: {} },
        expectedVersion: 0,
      },
      {
        op: "put",
        record: { key: "old-done", kind: "claim", status: "done", updatedAt: at, data: {} },
        expectedVersion: 0,
      },
    ]);
    now += 5000;
    expect(await claim(deps, "old-done", 1000)).toBe(false);
    expect(await claim(deps, "old-held", 1000)).toBe(true);
    await finishClaim(deps, "old-done"); // already finished: nothing written
    expect((await store.get("old-done"))?.version).toBe(1);
  });

  it("taken inside a step that must end in 2 s, is free to take over the margin after that end", async () => {
    const staleMs = 5 * 60_000;
    expect(
      await withinStepTime(
        () => 2_000,
        () => claim(deps, "turn#t#2", staleMs),
      ),
    ).toBe(true);
    expect(await store.get("turn#t#2")).toMatchObject({
      data: { state: "held", leaseUntil: new Date(now + 2_000 + CLAIM_LEASE_MARGIN_MS).toISOString() },
    });
    now += 2_000 + CLAIM_LEASE_MARGIN_MS - 1;
    expect(await claim(deps, "turn#t#2", staleMs)).toBe(false); // the step may still be ending
    now += 1;
    // Lambda's retry: the lease is over long before staleMs (5 minutes) would be.
    expect(
      await withinStepTime(
        () => 60_000,
        () => claim(deps, "turn#t#2", staleMs),
      ),
    ).toBe(true);
    expect(await claim(deps, "turn#t#2", staleMs)).toBe(false); // the retry holds it now
  });

  it("never holds longer than staleMs, and reads claims written before leases by their age", async () => {
    expect(
      await withinStepTime(
        () => 3_600_000,
        () => claim(deps, "long", 1000),
      ),
    ).toBe(true);
    now += 1000;
    expect(await claim(deps, "long", 1000)).toBe(true);
    await store.transact([
      {
        op: "put",
        record: {
          key: "pre-lease",
          kind: "claim",
          updatedAt: new Date(now).toISOString(),
          data: { state: "held" },
        },
        expectedVersion: 0,
      },
    ]);
    now += 999;
    expect(await claim(deps, "pre-lease", 1000)).toBe(false);
    now += 1;
    expect(await claim(deps, "pre-lease", 1000)).toBe(true);
  });
});
