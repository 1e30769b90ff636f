/**
 * The EventBus contract: what every adapter must do, run against each of them
 * (event-bus-in-process.test.ts, event-bus-eventbridge.int.test.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidPatternError, TooLargeError, ValidationError } from "../../shared/kernel/errors.ts";
import type { BusEnvelope, BusEventInput, EventBus, Subscription } from "../../shared/ports/event-bus.ts";

export interface BusFixture {
  bus: EventBus;
  /**
   * Subscribes on the bus and does whatever else delivery needs (on AWS: the rule and its target).
   * Rejects when the bus refuses the subscription.
   */
  subscribe(sub: Subscription): Promise<() => void>;
  /** Resolves when every delivery (including retries) of what was published so far is done. */
  settle(): Promise<void>;
  cleanup(): Promise<void>;
}

const SOURCE = "arbor.test";
const PARENT = "cld:common.Conversation.c1/common.Message.m1/plan.Task.t1";

let seq = 0;
function newId(label: string): string {
  seq += 1;
  return `${label}-${Date.now().toString(36)}-${seq}`;
}

function ev(
  detailType: string,
  detail: Record<string, unknown>,
  extra: Partial<BusEventInput> = {},
): BusEventInput {
  return { id: newId(detailType), source: SOURCE, detailType, detail, ...extra };
}

/** A handler that records what it receives. */
function recorder(): {
  events: BusEnvelope[];
  ids: () => string[];
  handler: (e: BusEnvelope) => Promise<void>;
} {
  const events: BusEnvelope[] = [];
  return {
    events,
    ids: () => events.map((e) => e.id).sort(),
    handler: async (e) => {
      events.push(e);
    },
  };
}

const sorted = (ids: readonly string[]) => [...ids].sort();

export function eventBusContract(name: string, setup: () => Promise<BusFixture>): void {
  describe(`EventBus contract: ${name}`, () => {
    let f: BusFixture;

    beforeEach(async () => {
      f = await setup();
    });

    afterEach(async () => {
      await f.cleanup();
    });

    it("gives a handler exactly the events its pattern matches (URN prefix, detail-type, anything-but)", async () => {
      const children = recorder();
      const completions = recorder();
      const notResourcePuts = recorder();
      // How a parent task waits for its children: RESOURCE_PUT under its URN prefix.
      await f.subscribe({
        name: "children-of-t1",
        pattern: { "detail-type": ["RESOURCE_PUT"], detail: { urn: [{ prefix: `${PARENT}/` }] } },
        handler: children.handler,
      });
      await f.subscribe({
        name: "completions",
        pattern: { "detail-type": ["TaskCompleted"] },
        handler: completions.handler,
      });
      await f.subscribe({
        name: "not-resource-puts",
        pattern: { source: [SOURCE], "detail-type": [{ "anything-but": ["RESOURCE_PUT"] }] },
        handler: notResourcePuts.handler,
      });

      const childPut = ev("RESOURCE_PUT", { urn: `${PARENT}/plan.Task.t2`, resourceType: "Task" });
      const grandchildPut = ev("RESOURCE_PUT", {
        urn: `${PARENT}/plan.Task.t2/common.Message.m9`,
        resourceType: "Message",
      });
      const parentItself = ev("RESOURCE_PUT", { urn: PARENT, resourceType: "Task" });
      const siblingWithSamePrefix = ev("RESOURCE_PUT", {
        urn: `${PARENT}0/plan.Task.t3`,
        resourceType: "Task",
      });
      const childDelete = ev("RESOURCE_DELETE", { urn: `${PARENT}/plan.Task.t2`, resourceType: "Task" });
      const completed = ev("TaskCompleted", { taskId: `${PARENT}/plan.Task.t2` });
      const started = ev("TaskStarted", { taskId: `${PARENT}/plan.Task.t2` });
      const otherSource = ev("TaskStarted", { taskId: PARENT }, { source: "arbor.elsewhere" });
      const all = [
        childPut,
        grandchildPut,
        parentItself,
        siblingWithSamePrefix,
        childDelete,
        completed,
        started,
        otherSource,
      ];

      await f.bus.publish(all);
      await f.settle();

      expect(children.ids()).toEqual(sorted([childPut.id, grandchildPut.id]));
      expect(completions.ids()).toEqual(sorted([completed.id]));
      expect(notResourcePuts.ids()).toEqual(sorted([childDelete.id, completed.id, started.id]));
    });

    it("delivers EventBridge's envelope with the published id, fields and detail unchanged", async () => {
      const got = recorder();
      await f.subscribe({ name: "everything", pattern: { source: [SOURCE] }, handler: got.handler });
      const detail = {
        urn: `${PARENT}/plan.Task.t2`,
        nested: { list: [1, 2.5, -3, "x", null, true, { deep: ["y"] }], empty: {}, emptyList: [] },
        text: 'héllo wörld ✓ 🌳 "quoted" \\ back\nslash',
        zero: 0,
        no: false,
        nothing: null,
      };
      const timed = ev("RESOURCE_PUT", detail, {
        time: "2024-05-01T12:34:56Z",
        resources: [`${PARENT}/plan.Task.t2`, PARENT],
      });
      const untimed = ev("TaskStarted", { taskId: PARENT });

      await f.bus.publish([timed, untimed]);
      await f.settle();

      expect(got.events).toHaveLength(2);
      const first = got.events.find((e) => e.id === timed.id);
      const second = got.events.find((e) => e.id === untimed.id);
      if (!first || !second) throw new Error(`missing deliveries: got ${JSON.stringify(got.ids())}`);

      expect(Object.keys(first).sort()).toEqual(
        ["account", "detail", "detail-type", "id", "region", "resources", "source", "time", "version"].sort(),
      );
      expect(first.version).toBe("0");
      expect(first["detail-type"]).toBe("RESOURCE_PUT");
      expect(first.source).toBe(SOURCE);
      expect(first.account).toMatch(/^\d{12}$/);
      expect(first.region).toMatch(/^[a-z0-9-]+$/);
      expect(first.time).toBe("2024-05-01T12:34:56Z");
      expect(first.resources).toEqual([`${PARENT}/plan.Task.t2`, PARENT]);
      expect(first.detail).toStrictEqual(detail);

      expect(second.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      expect(Math.abs(Date.parse(second.time) - Date.now())).toBeLessThan(60_000);
      expect(second.resources).toEqual([]);
      expect(second.detail).toStrictEqual({ taskId: PARENT });
    });

    it("delivers an event matched by two subscriptions to both", async () => {
      const a = recorder();
      const b = recorder();
      await f.subscribe({ name: "all-test-events", pattern: { source: [SOURCE] }, handler: a.handler });
      await f.subscribe({
        name: "under-t1",
        pattern: { detail: { urn: [{ prefix: `${PARENT}/` }] } },
        handler: b.handler,
      });
      const shared = ev("RESOURCE_PUT", { urn: `${PARENT}/plan.Task.t5`, resourceType: "Task" });
      const onlyA = ev("RESOURCE_PUT", { urn: "cld:common.Conversation.c2", resourceType: "Conversation" });

      await f.bus.publish([shared, onlyA]);
      await f.settle();

      expect(a.ids()).toEqual(sorted([shared.id, onlyA.id]));
      expect(b.ids()).toEqual([shared.id]);
    });

    it("routes by a prefix of `resources` (any element matches): a subscriber by URN prefix", async () => {
      const got = recorder();
      const tenant = "cld:common.Tenant.acme";
      await f.subscribe({
        name: "acme-resources",
        pattern: {
          source: [SOURCE],
          "detail-type": ["RESOURCE_PUT", "RESOURCE_DELETE"],
          resources: [{ prefix: `${tenant}/` }],
        },
        handler: got.handler,
      });
      const put = (urn: string, ...others: string[]) =>
        ev("RESOURCE_PUT", { urn }, { resources: [...others, urn] });
      const mine = put(`${tenant}/common.Conversation.c1`);
      const deep = ev(
        "RESOURCE_DELETE",
        { urn: `${tenant}/common.Conversation.c1/common.Message.m1` },
        {
          resources: [`${tenant}/common.Conversation.c1/common.Message.m1`],
        },
      );
      const secondElement = put(`${tenant}/common.Tool.calc`, "cld:common.Tenant.beta/common.Tool.calc");
      const lookalike = put("cld:common.Tenant.acme2/common.Conversation.c1"); // acme2: not below acme/
      const other = put("cld:common.Tenant.beta/common.Conversation.c1");
      const itself = put(tenant); // the prefix ends in "/": the tenant's own URN is not below it
      const none = ev("RESOURCE_PUT", { urn: `${tenant}/common.Conversation.c9` }); // no resources at all
      const otherType = ev(
        "TaskStarted",
        { taskId: PARENT },
        { resources: [`${tenant}/common.Conversation.c1`] },
      );

      await f.bus.publish([mine, deep, secondElement, lookalike, other, itself, none, otherType]);
      await f.settle();

      expect(got.ids()).toEqual(sorted([mine.id, deep.id, secondElement.id]));
    });

    it("stops delivering after unsubscribe", async () => {
      const got = recorder();
      const unsubscribe = await f.subscribe({
        name: "short-lived",
        pattern: { source: [SOURCE] },
        handler: got.handler,
      });
      const before = ev("TaskStarted", { taskId: PARENT });
      await f.bus.publish([before]);
      await f.settle();
      expect(got.ids()).toEqual([before.id]);

      unsubscribe();
      const after = ev("TaskCompleted", { taskId: PARENT });
      await f.bus.publish([after]);
      await f.settle();

      expect(got.ids()).toEqual([before.id]);
    });

    it("delivers all 25 events of one publish (more than one PutEvents batch)", async () => {
      const got = recorder();
      await f.subscribe({ name: "bulk", pattern: { "detail-type": ["RESOURCE_PUT"] }, handler: got.handler });
      const events = Array.from({ length: 25 }, (_, i) =>
        ev("RESOURCE_PUT", { urn: `${PARENT}/plan.Task.b${i}`, resourceType: "Task", index: i }),
      );

      await f.bus.publish(events);
      await f.settle();

      expect(got.events).toHaveLength(25);
      expect(got.ids()).toEqual(sorted(events.map((e) => e.id)));
      for (const e of events) {
        expect(got.events.find((g) => g.id === e.id)?.detail).toStrictEqual(e.detail);
      }
    });

    it("redelivers to a failing handler (at least once), and an id-deduplicating handler does its work once", async () => {
      const attempts = new Map<string, number>();
      const done = new Set<string>();
      const effects: string[] = [];
      await f.subscribe({
        name: "flaky-but-idempotent",
        pattern: { "detail-type": ["TaskCompleted"] },
        handler: async (e) => {
          const n = (attempts.get(e.id) ?? 0) + 1;
          attempts.set(e.id, n);
          // The side effect happens before the crash, so redeliveries must be deduplicated.
          if (!done.has(e.id)) {
            done.add(e.id);
            effects.push(e.id);
          }
          if (n <= 2) throw new Error(`simulated crash ${n} for ${e.id}`);
        },
      });
      const first = ev("TaskCompleted", { taskId: `${PARENT}/plan.Task.a` });
      const second = ev("TaskCompleted", { taskId: `${PARENT}/plan.Task.b` });

      await f.bus.publish([first, second]);
      await f.settle();
      expect(attempts.get(first.id)).toBe(3);
      expect(attempts.get(second.id)).toBe(3);

      // A publisher retry sends the same event again: same id, so the handler skips it.
      await f.bus.publish([first]);
      await f.settle();

      expect(attempts.get(first.id)).toBeGreaterThanOrEqual(4);
      expect(sorted(effects)).toEqual(sorted([first.id, second.id]));
    });

    it("rejects an event over 256 KiB with TooLargeError and delivers nothing of that publish", async () => {
      const got = recorder();
      await f.subscribe({ name: "watch-large", pattern: { source: [SOURCE] }, handler: got.handler });
      const small = ev("TaskStarted", { taskId: PARENT });
      const large = ev("RESOURCE_PUT", { urn: PARENT, blob: "x".repeat(256 * 1024) });

      await expect(f.bus.publish([small, large])).rejects.toBeInstanceOf(TooLargeError);
      await f.settle();

      expect(got.events).toEqual([]);
    });

    it("rejects an invalid event (no source) with ValidationError and delivers nothing of that publish", async () => {
      const got = recorder();
      await f.subscribe({
        name: "watch-invalid",
        pattern: { "detail-type": ["TaskStarted"] },
        handler: got.handler,
      });
      const valid = ev("TaskStarted", { taskId: PARENT });
      const { source: _dropped, ...sourceless } = ev("TaskStarted", { taskId: PARENT });

      await expect(f.bus.publish([valid, sourceless as BusEventInput])).rejects.toBeInstanceOf(
        ValidationError,
      );
      await f.settle();

      expect(got.events).toEqual([]);
    });

    it("throws at subscribe time for an invalid pattern", async () => {
      const handler = async () => {};
      await expect(
        f.subscribe({ name: "bad-leaf", pattern: { detail: { urn: "not-an-array" } }, handler }),
      ).rejects.toBeInstanceOf(InvalidPatternError);
      expect(() =>
        f.bus.subscribe({
          name: "bad-numeric",
          pattern: { detail: { n: [{ numeric: [">", "one"] }] } },
          handler,
        }),
      ).toThrow(InvalidPatternError);
    });
  });
}
