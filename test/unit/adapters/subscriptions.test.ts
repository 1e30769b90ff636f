import { describe, expect, it } from "vitest";
import { SubscriptionRegistry } from "../../../shared/adapters/shared/subscriptions.ts";
import { compilePattern } from "../../../shared/kernel/event-pattern/index.ts";
import type { BusEnvelope } from "../../../shared/ports/event-bus.ts";

const event = (detailType: string, detail: Record<string, unknown> = {}): BusEnvelope => ({
  version: "0",
  id: "e1",
  "detail-type": detailType,
  source: "arbor",
  account: "0",
  time: "2026-11-29T14:00:00Z",
  region: "local",
  resources: [],
  detail,
});
const handler = async () => {};

describe("the subscriptions an event is matched against", () => {
  it("finds every matching one, in the order they were added, whether its pattern names detail-types or not", () => {
    const subs = new SubscriptionRegistry();
    subs.add({ name: "ready", pattern: { "detail-type": ["TASK_READY"] }, handler });
    subs.add({ name: "all-arbor", pattern: { source: ["arbor"] }, handler });
    subs.add({ name: "prefixed", pattern: { "detail-type": [{ prefix: "TASK_" }] }, handler });
    subs.add({ name: "either", pattern: { "detail-type": ["RESOURCE_PUT", "TASK_READY"] }, handler });
    subs.add({
      name: "or",
      pattern: { $or: [{ "detail-type": ["TASK_READY"] }, { source: ["x"] }] },
      handler,
    });
    subs.add({
      name: "put-of-x",
      pattern: { "detail-type": ["RESOURCE_PUT"], detail: { urn: ["x"] } },
      handler,
    });
    const names = (e: BusEnvelope, name?: string) => subs.matching(e, name).map((s) => s.name);
    expect(names(event("TASK_READY"))).toEqual(["ready", "all-arbor", "prefixed", "either", "or"]);
    expect(names(event("RESOURCE_PUT", { urn: "x" }))).toEqual(["all-arbor", "either", "put-of-x"]);
    expect(names(event("RESOURCE_PUT", { urn: "y" }))).toEqual(["all-arbor", "either"]);
    expect(names(event("OTHER"))).toEqual(["all-arbor"]);
    expect(names(event("TASK_READY"), "either")).toEqual(["either"]);
    expect(names(event("OTHER"), "either")).toEqual([]);
  });

  it("keeps an observer of named URNs apart: an event meets only those of its URN (or of an element of its URN array), in order with the others", () => {
    const subs = new SubscriptionRegistry();
    subs.add({ name: "any-put", pattern: { "detail-type": ["RESOURCE_PUT"] }, handler });
    const offX = subs.add({
      name: "x",
      pattern: { "detail-type": ["RESOURCE_PUT"], detail: { urn: ["x"], name: ["output"] } },
      handler,
    });
    subs.add({
      name: "x-or-y",
      pattern: { "detail-type": ["RESOURCE_PUT"], detail: { urn: ["x", "y"] } },
      handler,
    });
    subs.add({ name: "all", pattern: { source: ["arbor"] }, handler });
    subs.add({
      name: "prefix-x",
      pattern: { "detail-type": ["RESOURCE_PUT"], detail: { urn: [{ prefix: "x" }] } },
      handler,
    });
    const names = (e: BusEnvelope) => subs.matching(e).map((s) => s.name);
    expect(names(event("RESOURCE_PUT", { urn: "x", name: "output" }))).toEqual([
      "any-put",
      "x",
      "x-or-y",
      "all",
      "prefix-x",
    ]);
    expect(names(event("RESOURCE_PUT", { urn: "x", name: "turn" }))).toEqual([
      "any-put",
      "x-or-y",
      "all",
      "prefix-x",
    ]);
    expect(names(event("RESOURCE_PUT", { urn: "y" }))).toEqual(["any-put", "x-or-y", "all"]);
    expect(names(event("RESOURCE_PUT", { urn: ["z", "x"], name: "output" }))).toEqual([
      "any-put",
      "x",
      "x-or-y",
      "all",
      "prefix-x",
    ]);
    expect(names(event("RESOURCE_PUT", {}))).toEqual(["any-put", "all"]);
    expect(names(event("TASK_READY", { urn: "x" }))).toEqual(["all"]);
    offX();
    expect(names(event("RESOURCE_PUT", { urn: "x", name: "output" }))).toEqual([
      "any-put",
      "x-or-y",
      "all",
      "prefix-x",
    ]);
  });

  it("an observer of a URN gets an event whose detail.urn holds it in a nested array (the matcher flattens them)", () => {
    const pattern = { "detail-type": ["RESOURCE_PUT"], detail: { urn: ["x"] } };
    const e = event("RESOURCE_PUT", { urn: [["x"]] });
    expect(compilePattern(pattern)(e)).toBe(true); // EventBridge semantics, as the matcher has them
    const subs = new SubscriptionRegistry();
    subs.add({ name: "x", pattern, handler });
    expect(subs.matching(e).map((s) => s.name)).toEqual(["x"]);
  });

  it("forgets one removed, and only that one (a newer one under its name stays)", () => {
    const subs = new SubscriptionRegistry();
    const off = subs.add({ name: "a", pattern: { "detail-type": ["T"] }, handler });
    const offAny = subs.add({ name: "b", pattern: { source: ["arbor"] }, handler });
    off();
    expect(subs.matching(event("T")).map((s) => s.name)).toEqual(["b"]);
    subs.add({ name: "a", pattern: { "detail-type": ["T"] }, handler });
    off(); // the old remover: the new "a" stays
    offAny();
    expect(subs.matching(event("T")).map((s) => s.name)).toEqual(["a"]);
    expect(() => subs.add({ name: "a", pattern: { source: ["arbor"] }, handler })).toThrow(/already exists/);
  });
});
