import { describe, expect, it } from "vitest";
import {
  assertPublishable,
  entrySize,
  toEnvelope,
  wireDetail,
} from "../../../shared/adapters/shared/bus-envelope.ts";
import { TooLargeError } from "../../../shared/kernel/errors.ts";
import { type BusEventInput, MAX_EVENT_BYTES } from "../../../shared/ports/event-bus.ts";

const base = { id: "evt-1", source: "arbor", detailType: "RESOURCE_PUT" };
const VARIANTS: [string, (pad: string) => BusEventInput][] = [
  ["a detail of one field", (pad) => ({ ...base, detail: { pad } })],
  ["unicode, nesting", (pad) => ({ ...base, detail: { name: "Zoë ✓ 𝄞", nested: { list: [1, "二"] }, pad } })],
  [
    "a trace context and resources",
    (pad) => ({
      ...base,
      detail: { pad },
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      resources: ["cld:common.Tenant.acme", "cld:common.Tenant.acme/common.Conversation.ü"],
    }),
  ],
];

describe("an event's size, as EventBridge counts it (the detail as sent, with the reserved keys)", () => {
  for (const [name, event] of VARIANTS)
    it(`takes an entry of exactly the limit and refuses one byte more: ${name}`, () => {
      const sizeOf = (e: BusEventInput) => entrySize(e, JSON.stringify(wireDetail(e)));
      const fill = MAX_EVENT_BYTES - sizeOf(event(""));
      const exact = event("x".repeat(fill));
      expect(sizeOf(exact)).toBe(MAX_EVENT_BYTES);
      expect(assertPublishable(exact)).toBe(JSON.stringify(exact.detail));
      expect(() => assertPublishable(event("x".repeat(fill + 1)))).toThrow(TooLargeError);
    });

  it("counts an empty detail as EventBridge does: only the reserved key in it", () => {
    const e = { ...base, detail: {} };
    expect(() => assertPublishable(e)).not.toThrow();
    expect(entrySize(e, JSON.stringify(wireDetail(e)))).toBe(
      14 + 5 + 12 + JSON.stringify(wireDetail(e)).length,
    );
  });
});

describe("the envelope a handler gets", () => {
  it("is a copy of the event (its detail and resources), stamped to the second", () => {
    const e: BusEventInput = { ...base, detail: { a: { b: 1 } }, resources: ["r1"] };
    const envelope = toEnvelope(e, {
      account: "1",
      region: "local",
      now: new Date("2026-11-29T14:00:05.987Z"),
    });
    expect(envelope.time).toBe("2026-11-29T14:00:05Z");
    expect(envelope.detail).toEqual(e.detail);
    expect(envelope.detail).not.toBe(e.detail);
    expect(envelope.resources).not.toBe(e.resources);
    const later = toEnvelope(e, { account: "1", region: "local", now: new Date("2026-11-29T14:00:06.001Z") });
    expect(later.time).toBe("2026-11-29T14:00:06Z");
  });
});
