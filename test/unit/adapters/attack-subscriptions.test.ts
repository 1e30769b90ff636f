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

describe("the registry delivers what the pattern matcher matches", () => {
  it("an observer of a URN gets an event whose detail.urn holds it in a nested array (the matcher flattens them)", () => {
    const pattern = { "detail-type": ["RESOURCE_PUT"], detail: { urn: ["x"] } };
    const e = event("RESOURCE_PUT", { urn: [["x"]] });
    expect(compilePattern(pattern)(e)).toBe(true); // EventBridge semantics, as the matcher has them
    const subs = new SubscriptionRegistry();
    subs.add({ name: "x", pattern, handler });
    expect(subs.matching(e).map((s) => s.name)).toEqual(["x"]);
  });
});
