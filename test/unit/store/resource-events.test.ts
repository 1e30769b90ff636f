import { hash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventLine } from "../../../cli/lib/resource-events.ts";
import { InProcessEventBus } from "../../../shared/adapters/local/in-process-event-bus.ts";
import { SqliteDatabase } from "../../../shared/adapters/local/sqlite-database.ts";
import { SqliteObjectStore } from "../../../shared/adapters/local/sqlite-object-store.ts";
import { eventIdFor } from "../../../shared/domain/events.ts";
import { withMeta } from "../../../shared/domain/resources.ts";
import { objectKey, tenantUrn } from "../../../shared/domain/urn.ts";
import { UnavailableError } from "../../../shared/kernel/errors.ts";
import type { BusEnvelope, BusEventInput, EventBus } from "../../../shared/ports/event-bus.ts";
import {
  announcesPut,
  BusAnnouncer,
  RESOURCE_DELETE,
  RESOURCE_PUT,
  resourceAnnouncer,
  resourceEvent,
} from "../../../shared/store/resource-events.ts";
import { ResourceStore } from "../../../shared/store/resource-store.ts";

/**
 * The resource store's announcements (store/resource-events.ts): which writes go on the bus,
 * with which ids and shape, and what a delete, a rewrite, a failed publish and a burst of writes do.
 */
const TENANT = tenantUrn("acme");
const conversation = withMeta({ type: "common.Conversation", name: "c1", id: "c1", parent: TENANT });
const message = withMeta({ type: "common.Message", name: "m1", id: "m1", parent: conversation.id });
const task = withMeta({ type: "plan.Task", name: "root", id: "t1", parent: message.id });
const turn = withMeta({ type: "common.Message", name: "turn-1", parent: task.id });
const output = withMeta({ type: "common.Message", name: "output", parent: task.id });

/** A bus that records what is published (and counts the publish calls). */
class RecordingBus implements EventBus {
  readonly published: BusEventInput[] = [];
  calls = 0;
  fail: Error | undefined;
  /** While set, a publish waits for it. */
  gate: Promise<void> | undefined;
  async publish(events: readonly BusEventInput[]): Promise<void> {
    this.calls++;
    await new Promise((r) => setImmediate(r)); // a round trip, as PutEvents takes
    await this.gate;
    if (this.fail) throw this.fail;
    this.published.push(...events);
  }
  subscribe(): () => void {
    return () => {};
  }
  async close(): Promise<void> {}
}

let dir: string;
let database: SqliteDatabase;
let objects: SqliteObjectStore;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-resource-events-"));
  database = new SqliteDatabase({ path: join(dir, "arbor.db"), durable: false });
  objects = new SqliteObjectStore({ database });
});
afterEach(async () => {
  await database.close();
  await rm(dir, { recursive: true, force: true });
});

const store = (bus: EventBus, setting?: "default" | "all") =>
  new ResourceStore(objects, { announcer: new BusAnnouncer(bus, setting) });

describe("which puts the store announces", () => {
  it("announces every kind but a task's transcript; the output is the engine's", () => {
    const kinds = [
      withMeta({ type: "common.Tenant", name: "acme", id: "acme" }),
      conversation,
      message,
      withMeta({ type: "common.Message", name: "plan", parent: message.id }),
      task,
      withMeta({ type: "plan.Task", name: "child", parent: task.id }),
      withMeta({ type: "common.Assistant", name: "generalist", parent: TENANT }),
      withMeta({ type: "common.Tool", name: "calculator", parent: TENANT }),
      withMeta({ type: "uip.Interaction", name: "approve-plan", parent: task.id }),
    ];
    for (const meta of kinds) expect(announcesPut(meta), meta.type).toBe(true);
    for (const name of ["prompt", "turn-1", "turn-1-tool-0", "tool-result-x", "evaluation-0", "output"])
      expect(announcesPut({ ...turn, name }), name).toBe(false);
    // `all`: the transcript too, never the output
    expect(announcesPut(turn, "all")).toBe(true);
    expect(announcesPut(output, "all")).toBe(false);
  });

  it("publishes RESOURCE_PUT with the resource's URN, type, name, hash and tenant, its id derived from them", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    const written = await rs.put({ meta: conversation, startedBy: "user_ada" });
    const bytes = await objects.get(objectKey(conversation.id));
    const contentHash = hash("sha256", bytes as Uint8Array);
    expect(written.contentHash).toBe(contentHash);
    expect(bus.published).toEqual([
      {
        id: eventIdFor("RESOURCE_PUT", conversation.id, contentHash),
        source: "arbor",
        detailType: "RESOURCE_PUT",
        detail: {
          urn: conversation.id,
          resourceType: "common.Conversation",
          name: "c1",
          contentHash,
          tenant: "acme",
        },
        resources: [conversation.id],
      },
    ]);
  });

  it("a rewrite of the same bytes is the same event; a change is a new one", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    await rs.put({ meta: conversation, startedBy: "user_ada" });
    await rs.put({ meta: conversation, startedBy: "user_ada" });
    await rs.put({ meta: conversation, startedBy: "user_ada", title: "Offsite" });
    const ids = bus.published.map((e) => e.id);
    expect(ids).toHaveLength(3);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[2]).not.toBe(ids[0]);
  });

  it("announces nothing of a task's transcript or output, and everything with `all` but the output", async () => {
    const bus = new RecordingBus();
    await store(bus).put({ meta: turn, role: "assistant", content: "thinking" });
    await store(bus).put({ meta: output, role: "assistant", content: "done" });
    expect(bus.published).toEqual([]);
    await store(bus, "all").put({ meta: turn, role: "assistant", content: "thinking" });
    await store(bus, "all").put({ meta: output, role: "assistant", content: "done" });
    expect(bus.published.map((e) => e.detail.name)).toEqual(["turn-1"]);
  });

  it("`off` gives the store no announcer (the engine's outputs are still announced, by the engine)", () => {
    expect(resourceAnnouncer(new RecordingBus(), "off")).toBeUndefined();
    expect(resourceAnnouncer(new RecordingBus())).toBeInstanceOf(BusAnnouncer);
  });

  it("without an announcer, writes go on as before and nothing is published", async () => {
    const rs = new ResourceStore(objects);
    await rs.put({ meta: conversation, startedBy: "user_ada" });
    expect(await rs.delete(conversation.id)).toBe(true);
    expect(await rs.delete(conversation.id)).toBe(false);
  });
});

describe("deletes", () => {
  it("announce RESOURCE_DELETE naming the hash of what was removed; a delete of what is absent says nothing", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    const { contentHash } = await rs.put({ meta: conversation, startedBy: "user_ada" });
    bus.published.length = 0;
    expect(await rs.delete(conversation.id)).toBe(true);
    expect(await rs.get(conversation.id)).toBeUndefined();
    expect(await rs.delete(conversation.id)).toBe(false);
    expect(await rs.delete(`${TENANT}/common.Conversation.never`)).toBe(false);
    expect(bus.published).toEqual([
      {
        id: eventIdFor("RESOURCE_DELETE", conversation.id, contentHash),
        source: "arbor",
        detailType: "RESOURCE_DELETE",
        detail: {
          urn: conversation.id,
          resourceType: "common.Conversation",
          name: "c1",
          contentHash,
          tenant: "acme",
        },
        resources: [conversation.id],
      },
    ]);
  });

  it("a document that no longer parses is removed, and announced by its URN's type", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    const urn = `${TENANT}/common.Conversation.broken`;
    await objects.put(objectKey(urn), Buffer.from("{not json"), { contentType: "application/json" });
    expect(await rs.delete(urn)).toBe(true);
    expect(bus.published.map((e) => [e.detailType, e.detail.resourceType, e.detail.name])).toEqual([
      [RESOURCE_DELETE, "common.Conversation", "broken"],
    ]);
  });

  it("deletes even transcript messages' notices (what was there is gone, whatever it was)", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    await rs.put({ meta: turn, role: "assistant", content: "thinking" });
    expect(await rs.delete(turn.id)).toBe(true);
    expect(bus.published.map((e) => e.detailType)).toEqual([RESOURCE_DELETE]);
  });
});

describe("publishing", () => {
  it("a failed publish fails the put (the write stays: the step's retry announces it, same id)", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    bus.fail = new UnavailableError("EventBridge is down");
    await expect(rs.put({ meta: conversation, startedBy: "user_ada" })).rejects.toBeInstanceOf(
      UnavailableError,
    );
    expect(await rs.get(conversation.id)).toBeDefined();
    bus.fail = undefined;
    const { contentHash } = await rs.put({ meta: conversation, startedBy: "user_ada" });
    expect(bus.published.map((e) => e.id)).toEqual([
      eventIdFor("RESOURCE_PUT", conversation.id, contentHash),
    ]);
  });

  it("deferred (on AWS): a write does not wait for its notice; settled() waits for them all and throws a failed one, once", async () => {
    const bus = new RecordingBus();
    const rs = new ResourceStore(objects, {
      announcer: resourceAnnouncer(bus, "default", { deferred: true }),
    });
    let release: () => void = () => {};
    bus.gate = new Promise<void>((r) => {
      release = r;
    });
    // The put resolves while its publish still waits.
    await rs.put({ meta: conversation, startedBy: "user_ada" });
    expect(bus.published).toEqual([]);
    const settled = rs.settled();
    release();
    await settled;
    expect(bus.published.map((e) => e.detail.urn)).toEqual([conversation.id]);
    // A publish that fails is the next settled()'s error, and only its.
    bus.gate = undefined;
    bus.fail = new UnavailableError("EventBridge is down");
    await rs.put({
      meta: withMeta({ type: "common.Conversation", name: "c2", parent: tenantUrn("acme") }),
      startedBy: "x",
    });
    await expect(rs.settled()).rejects.toBeInstanceOf(UnavailableError);
    await expect(rs.settled()).resolves.toBeUndefined();
  });

  it("writes made together are announced in a few publish calls, not one each", async () => {
    const bus = new RecordingBus();
    const rs = store(bus);
    const tasks = Array.from({ length: 100 }, (_, i) =>
      withMeta({ type: "plan.Task", name: `t${i}`, parent: task.id }),
    );
    await Promise.all(tasks.map((meta) => rs.put({ meta, priority: "normal" })));
    expect(new Set(bus.published.map((e) => e.detail.urn))).toEqual(new Set(tasks.map((t) => t.id)));
    expect(bus.calls).toBeLessThan(10);
  });

  it("the engine's output announcement keeps its id and wake-up shape", () => {
    const e = resourceEvent(RESOURCE_PUT, {
      urn: output.id,
      resourceType: "common.Message",
      name: "output",
      contentHash: "abc",
    });
    expect(e.id).toBe(eventIdFor("RESOURCE_PUT", output.id, "abc"));
    expect(e.detail).toMatchObject({ urn: output.id, name: "output", tenant: "acme" });
    expect(e.resources).toEqual([output.id]);
  });

  it("over the in-process bus, a subscriber by `resources` prefix gets what lies below it, nothing beside it", async () => {
    const bus = new InProcessEventBus({ retryDelayMs: () => 1, deliveries: 2 });
    const got: BusEnvelope[] = [];
    bus.subscribe({
      name: "c1 only",
      pattern: {
        source: ["arbor"],
        "detail-type": [RESOURCE_PUT, RESOURCE_DELETE],
        resources: [conversation.id, { prefix: `${conversation.id}/` }],
      },
      handler: async (e) => void got.push(e),
    });
    const rs = new ResourceStore(objects, { announcer: new BusAnnouncer(bus) });
    await rs.put({ meta: conversation, startedBy: "user_ada" });
    await rs.put({ meta: message, role: "user", content: "hi" });
    const c10 = withMeta({ type: "common.Conversation", name: "c10", id: "c10", parent: TENANT });
    await rs.put({ meta: c10, startedBy: "user_ada" }); // shares c1's text prefix, not its element
    await rs.put({
      meta: withMeta({ type: "common.Conversation", name: "c1", id: "c1", parent: tenantUrn("acme2") }),
      startedBy: "x",
    });
    await rs.delete(message.id);
    await bus.idle();
    const seen = [...new Map(got.map((e) => [e.id, e])).values()];
    expect(seen.map((e) => [e["detail-type"], e.detail.urn])).toEqual([
      [RESOURCE_PUT, conversation.id],
      [RESOURCE_PUT, message.id],
      [RESOURCE_DELETE, message.id],
    ]);
    expect(got).toHaveLength(6); // every event delivered twice: deduplicated on the id
    await bus.close();
  });
});

describe("arbor events --prefix, printing a remote Arbor's events", () => {
  it("shows what a terminal would act on as U+FFFD", () => {
    const data = JSON.stringify({
      time: "2026-01-01T00:00:00.000Z",
      urn: "cld:common.Tenant.acme/x\u001b]0;owned\u0007",
      resourceType: "plan.Task\u009b2J\u202e",
    });
    const line = eventLine("RESOURCE_PUT", data);
    expect(line).toMatch(/^2026-01-01T00:00:00\.000Z {2}PUT {5}plan\.Task/);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(eventLine("overflow", JSON.stringify({ message: "dropped\u001b[2J" }))).toBe("! dropped\ufffd[2J");
  });
});
