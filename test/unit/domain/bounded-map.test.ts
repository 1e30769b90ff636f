import { afterEach, describe, expect, it, vi } from "vitest";
import { SqliteStateStore } from "../../../shared/adapters/local/sqlite-state-store.ts";
import { trimOldest } from "../../../shared/domain/bounded-map.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("trimOldest", () => {
  it("drops the oldest entries, a tenth of the limit at a time, and keeps the newest", () => {
    const map = new Map<number, string>();
    for (let i = 0; i < 100; i++) {
      map.set(i, `v${i}`);
      trimOldest(map, 50);
      expect(map.size).toBeLessThanOrEqual(50);
    }
    expect(map.has(99)).toBe(true);
    expect(map.has(0)).toBe(false);
    trimOldest(map, 50); // within the limit: nothing goes
    expect(map.size).toBeGreaterThanOrEqual(45);
    const keys = [...map.keys()];
    expect(keys).toEqual([...keys].sort((a, b) => a - b)); // the oldest went first
    trimOldest(map, 0);
    expect(map.size).toBe(0);
  });
});

describe("SqliteStateStore's memory of records", () => {
  it("stays within its limit without looking for the oldest record on every write (that walked past every hole a deletion left: slower the longer a process ran)", async () => {
    const store = new SqliteStateStore({ path: ":memory:", cacheRecords: 1_000 });
    try {
      const keys = vi.spyOn(Map.prototype, "keys");
      for (let i = 0; i < 3_000; i++)
        await store.transact([
          {
            op: "put",
            record: { key: `r${i}`, kind: "test", updatedAt: "2026-01-01T00:00:00.000Z", data: { i } },
            expectedVersion: 0,
          },
        ]);
      // 2,000 records past the limit: one walk per hundred of them, not one per record.
      expect(keys.mock.calls.length).toBeLessThanOrEqual(100);
      keys.mockRestore();
      // What was let go of is read again from the database.
      expect((await store.get("r0"))?.data).toEqual({ i: 0 });
      expect((await store.get("r2999"))?.data).toEqual({ i: 2999 });
    } finally {
      await store.close();
    }
  });
});
