import { afterEach, describe, expect, it, vi } from "vitest";
import { BytesCache, ENTRY_OVERHEAD } from "../../../../shared/adapters/local/bytes-cache.ts";

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

describe("BytesCache", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("stays within its byte budget and its entry limit, however many keys are written", () => {
    const cache = new BytesCache(10_000, 50);
    for (let i = 0; i < 5_000; i++) {
      cache.set(`k${i}`, i % 7 === 0 ? null : bytes(100 + (i % 5)));
      if (i % 3 === 0) cache.get(`k${i - 10}`);
      expect(cache.heldBytes).toBeLessThanOrEqual(10_000);
      expect(cache.size).toBeLessThanOrEqual(50);
    }
    expect(cache.get("k4999")).toEqual(bytes(104));
    expect(cache.get("k0")).toBeUndefined();
  });

  it("keeps what was read since over what was not, when it must let something go", () => {
    // Ten entries of 100 bytes, keys of 4 characters, fill it.
    const cache = new BytesCache(10 * (100 + 4 + ENTRY_OVERHEAD));
    for (let i = 0; i < 10; i++) cache.set(`old${i}`, bytes(100));
    cache.get("old0");
    cache.get("old5");
    for (let i = 0; i < 3; i++) cache.set(`new${i}`, bytes(100));
    expect(cache.get("old0")).toBeDefined();
    expect(cache.get("old5")).toBeDefined();
    expect(cache.get("new2")).toBeDefined();
    expect(cache.get("old1")).toBeUndefined();
    expect(cache.heldBytes).toBeLessThanOrEqual(10 * (100 + 4 + ENTRY_OVERHEAD));
  });

  it("counts a rewritten key once, forgets deleted ones, and holds nothing too big (dropping what it held)", () => {
    const cache = new BytesCache(8_000);
    cache.set("a", bytes(100));
    cache.set("a", bytes(300, 2));
    cache.set("b", null);
    expect(cache.heldBytes).toBe(300 + 2 * (1 + ENTRY_OVERHEAD));
    expect(cache.get("a")).toEqual(bytes(300, 2));
    expect(cache.get("b")).toBeNull();
    cache.set("a", bytes(1_001)); // more than an eighth of the budget
    expect(cache.get("a")).toBeUndefined();
    expect(cache.heldBytes).toBe(1 + ENTRY_OVERHEAD);
    cache.delete("b");
    expect(cache.get("b")).toBeUndefined();
    expect(cache.size).toBe(0);
    expect(new BytesCache(0).get("x")).toBeUndefined();
  });

  it("counts each entry's key and overhead, so keys known absent or of small objects cannot fill memory unseen", () => {
    // Counted by bytes alone, 200,000 absent URNs (some 40 MB with their keys) held for nothing.
    const budget = 1024 * 1024;
    const cache = new BytesCache(budget);
    const key = (i: number) =>
      `cld:common.Tenant.t/common.Conversation.c${i}/plan.Task.${"x".repeat(60)}${i}`;
    for (let i = 0; i < 50_000; i++) cache.set(key(i), i % 2 === 0 ? null : bytes(8));
    const each = key(0).length + ENTRY_OVERHEAD;
    expect(cache.heldBytes).toBeLessThanOrEqual(budget);
    expect(cache.size).toBeLessThan(budget / each);
    expect(cache.size).toBeGreaterThan((0.8 * budget) / (each + 8));
    cache.set(key(49_999), null);
    cache.delete(key(49_999));
    cache.delete(key(49_998));
    expect(cache.heldBytes).toBeLessThanOrEqual(budget - 2 * each);
  });

  it("answers a hit without changing its Map (an LRU's delete and re-insert per read made reads and writes slow in a big cache)", () => {
    const cache = new BytesCache(1_000_000);
    for (let i = 0; i < 100; i++) cache.set(`k${i}`, bytes(10));
    const deletes = vi.spyOn(Map.prototype, "delete");
    const sets = vi.spyOn(Map.prototype, "set");
    for (let i = 0; i < 100; i++) expect(cache.get(`k${i}`)).toEqual(bytes(10));
    cache.set("k3", bytes(20)); // a rewrite keeps its place
    expect(deletes).not.toHaveBeenCalled();
    expect(sets).not.toHaveBeenCalled();
  });
});
