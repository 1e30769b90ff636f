import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import { type ApiEnv, errorHandler } from "../../shared/channels/http/http-kit.ts";
import { resourceEventRoutes } from "../../shared/channels/http/http-resource-events.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { eventIdFor } from "../../shared/domain/events.ts";
import { parentUrn, tenantUrn } from "../../shared/domain/urn.ts";
import { UnavailableError } from "../../shared/kernel/errors.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import type { Authenticated } from "../../shared/ports/key-store.ts";
import { resourceEvent } from "../../shared/store/resource-events.ts";
import { Harness } from "./engine-harness.ts";
import { acme } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";

/**
 * Resource events under attack: a client that never reads (the queue it may hold is bounded, the
 * writers never wait for it), the API function (501 with the AWS way, after the same checks), and
 * a publish that fails right after its write (the step fails and is run again: the notices come
 * then, with the same ids). The prefix refusals and stream slots are in resource-events.test.ts.
 */
const ACME = tenantUrn("acme");
const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const script: ScriptFunction = async (r) => {
  if (isPlan(r))
    return planOf({
      name: "Offsite",
      purpose: "Plan the offsite",
      subtasks: [
        { name: "Venue", purpose: "Find a venue" },
        { name: "Agenda", purpose: "Write the agenda" },
      ],
    });
  if (isEvaluation(r)) return pass();
  return { content: `done: ${taskName(r)}` };
};

let h: Harness;
beforeAll(async () => {
  h = await Harness.create({
    script,
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
    bus: { deliveries: 2 },
  });
});
afterAll(async () => {
  await h?.close();
});

describe("a client that does not read", () => {
  it("holds at most maxQueued events for it, then says overflow and ends; the writers never wait", async () => {
    const who: Authenticated = {
      actor: { id: "user_root", kind: "human" },
      caller: { tenant: "acme", roles: ["admin"] },
    };
    const app = new Hono<ApiEnv>();
    app.use(async (c, next) => {
      c.set("who", who);
      await next();
    });
    app.route("/", resourceEventRoutes(h.engine, { maxQueued: 5 }));
    app.onError(errorHandler({ error: () => {} }));
    const res = await app.request(`/v1/resource-events?prefix=${encodeURIComponent(ACME)}`, {
      headers: { accept: "text/event-stream" },
    });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read(); // `retry:`, then the client stalls

    // 200 writes while it does not read: each resolves (nothing waits for the stalled client).
    const slow = `${ACME}/common.Conversation.slow`;
    for (let i = 0; i < 200; i++)
      await h.rt.bus.publish([
        resourceEvent("RESOURCE_PUT", {
          urn: `${slow}/common.Message.m${i}`,
          resourceType: "common.Message",
          name: `m${i}`,
          contentHash: `h${i}`,
        }),
      ]);
    await h.idle();

    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const puts = text.split("\n").filter((l) => l === "event: RESOURCE_PUT").length;
    expect(puts).toBeGreaterThanOrEqual(5);
    expect(puts).toBeLessThanOrEqual(10); // what was held (5) and at most one batch already taken
    expect(text).toContain("event: overflow");
    expect(text.trimEnd().endsWith("}")).toBe(true); // the overflow notice is the last thing said
  });
});

describe("on the API function (bounded)", () => {
  it("answers 501 with the AWS way, after the same checks", async () => {
    const app = createServerApp({
      engine: h.engine,
      keys: new ApiKeys({ keys: [acme.entry] }),
      publicUrl: "http://127.0.0.1",
      events: { mode: "bounded" },
    });
    const get = (prefix: string) =>
      app.request(`/v1/resource-events?prefix=${encodeURIComponent(prefix)}`, {
        headers: { ...auth(acme.key), accept: "text/event-stream" },
      });
    const res = await get(`${ACME}/`);
    expect(res.status).toBe(501);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("NOT_IMPLEMENTED");
    expect(body.error.message).toContain('"resources":[{"prefix":"cld:common.Tenant.acme/"}]');
    expect(body.error.message).toContain("EventBridge rule");
    expect((await get(tenantUrn("beta"))).status).toBe(403);
    expect((await get("cld:")).status).toBe(400);
  });
});

describe("a publish that fails after the write (the worst moment)", () => {
  it("fails the step, which the bus runs again: the notices come then, with the same ids, and the run ends as usual", async () => {
    const g = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
    try {
      const bus = g.rt.bus;
      const publish = bus.publish.bind(bus);
      let failed = 0;
      bus.publish = async (events) => {
        if (
          failed === 0 &&
          events.some((e) => e.detailType === "RESOURCE_PUT" && e.detail.resourceType === "plan.Task")
        ) {
          failed++;
          throw new UnavailableError("the bus is down for a moment");
        }
        return publish(events);
      };
      const seen: BusEnvelope[] = [];
      bus.subscribe({
        name: "operator: tasks",
        pattern: {
          source: ["arbor"],
          "detail-type": ["RESOURCE_PUT"],
          detail: { resourceType: ["plan.Task"] },
        },
        handler: async (e) => void seen.push(e),
      });
      const { rootTaskId } = await g.submit("Plan our offsite");
      await g.idle();
      expect(failed).toBe(1);
      expect((await g.engine.result(rootTaskId)).view?.status).toBe("done");
      const tasks = await g.rt.resources.descendantUrns(parentUrn(rootTaskId) as string, "plan.Task");
      expect(tasks).toHaveLength(3);
      // Every task's notice came (after the retry), each id once per write of the same bytes.
      expect(new Set(seen.map((e) => e.detail.urn))).toEqual(new Set(tasks));
      for (const e of seen)
        expect(e.id).toBe(eventIdFor("RESOURCE_PUT", e.detail.urn as string, e.detail.contentHash as string));
    } finally {
      await g.close();
    }
  });
});
