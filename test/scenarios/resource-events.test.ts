import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { followResourceEvents } from "../../cli/lib/resource-events.ts";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { RateLimiter } from "../../shared/channels/http/rate-limit.ts";
import { eventIdFor } from "../../shared/domain/events.ts";
import { withMeta } from "../../shared/domain/resources.ts";
import { isWithin, parentUrn, tenantUrn } from "../../shared/domain/urn.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { Harness } from "./engine-harness.ts";
import { acme, beta, serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf, taskName } from "./scenarios.ts";
import { readSse, type SseEvent, type SseRead } from "./sse-client.ts";

/**
 * Resource events by URN prefix, end to end on the local runtime: a subscriber on the in-process
 * bus and a client of `GET /v1/resource-events` on a real server see the puts and deletes at and
 * below their prefix, and nothing beside it (another conversation, another tenant); each event
 * once, though the bus delivers everything twice; a person sees only what they may read.
 */
const carl = newApiKey({ id: "user_carl", kind: "human", tenant: "acme", roles: [] });
const admin = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const ACME = tenantUrn("acme");
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
let server: RunningServer;
beforeAll(async () => {
  h = await Harness.create({
    script,
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
    bus: { deliveries: 2 }, // every event twice, as EventBridge may
  });
  await h.engine.registerAssistants("beta", GENERALIST);
  server = await serveHttp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [acme.entry, beta.entry, carl.entry, admin.entry] }),
    events: { heartbeatMs: 100 },
    limiter: new RateLimiter({ streams: { perKey: 3, perTenant: 50 } }),
  });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const streamUrl = (prefix: string, extra = "") =>
  `${server.url}/v1/resource-events?prefix=${encodeURIComponent(prefix)}${extra}`;
const auth = (key: string) => ({ authorization: `Bearer ${key}` });

async function post(
  key: string,
  conversationUrn?: string,
): Promise<{ rootTaskId: string; conversationUrn: string }> {
  const res = await fetch(`${server.url}/v1/messages`, {
    method: "POST",
    headers: { ...auth(key), "content-type": "application/json" },
    body: JSON.stringify({ text: "Plan our offsite", ...(conversationUrn ? { conversationUrn } : {}) }),
  });
  expect(res.status).toBe(202);
  return (await res.json()) as { rootTaskId: string; conversationUrn: string };
}

let WATCHED = "";
let OTHER = "";
let BETA_WATCHED = "";

interface ResourceEventData {
  id: string;
  type: string;
  urn: string;
  resourceType: string;
  name: string;
  contentHash: string;
  tenant?: string;
}
const data = (e: SseEvent) => JSON.parse(e.data) as ResourceEventData;

/** Opens a stream; resolves `connected` once it is subscribed (its first block, `retry:`, came). */
function open(
  url: string,
  key: string,
  until: (events: SseEvent[]) => boolean,
): { connected: Promise<void>; read: Promise<SseRead> } {
  let connected = () => {};
  const ready = new Promise<void>((resolve) => {
    connected = resolve;
  });
  const read = readSse(url, {
    headers: auth(key),
    until: (events) => {
      connected();
      return until(events);
    },
  });
  void read.finally(connected); // refused: nothing to wait for
  return { connected: ready, read };
}

describe("a subscriber by URN prefix", () => {
  it("sees the puts and deletes under its prefix, once each, and nothing beside it", async () => {
    // Two conversations of ada's and one of beta's; a person follows a conversation once it is theirs.
    ({ conversationUrn: WATCHED } = await post(acme.key));
    ({ conversationUrn: OTHER } = await post(acme.key));
    ({ conversationUrn: BETA_WATCHED } = await post(beta.key));
    await h.idle();
    const onBus: BusEnvelope[] = [];
    const offBus = h.rt.bus.subscribe({
      name: "operator: the watched conversation",
      pattern: {
        source: ["arbor"],
        "detail-type": ["RESOURCE_PUT", "RESOURCE_DELETE"],
        resources: [WATCHED, { prefix: `${WATCHED}/` }],
      },
      handler: async (e) => void onBus.push(e),
    });
    let done = false;
    let deleted = "";
    const ada = open(streamUrl(WATCHED), acme.key, (events) =>
      events.some((e) => e.event === "RESOURCE_DELETE" && data(e).urn === deleted && deleted !== ""),
    );
    // The tenant's admin follows the whole tenant; carl (not the owner) too, and may read none of it.
    const root = open(streamUrl(ACME, "&types=RESOURCE_PUT"), admin.key, () => done);
    const nosy = open(streamUrl(`${ACME}/`), carl.key, () => done);
    await Promise.all([ada.connected, root.connected, nosy.connected]);

    const watched = await post(acme.key, WATCHED);
    const other = await post(acme.key, OTHER);
    await post(beta.key, BETA_WATCHED);
    const rootOutputOf = (urn: string) => urn.startsWith(`${watched.rootTaskId}/common.Message.`);
    await h.idle();
    for (const id of [watched.rootTaskId, other.rootTaskId])
      expect((await h.engine.result(id)).view?.status).toBe("done");

    // Deletes: one under the prefix, one beside it, one of nothing.
    // The planner's turn: a Message under the user's Message.
    const planMessage = (await h.rt.resources.descendantUrns(parentUrn(watched.rootTaskId) as string)).find(
      (u) => /\/common\.Message\.[^/]+\/common\.Message\.[^/]+$/.test(u),
    );
    expect(planMessage).toBeDefined();
    const otherTask = other.rootTaskId;
    expect(await h.rt.resources.delete(otherTask)).toBe(true);
    expect(await h.rt.resources.delete(`${WATCHED}/common.Message.never`)).toBe(false);
    deleted = planMessage as string;
    expect(await h.rt.resources.delete(deleted)).toBe(true);
    const adaRead = await ada.read;
    done = true;
    const [rootRead, nosyRead] = await Promise.all([root.read, nosy.read]);
    await h.idle();

    // ada's stream: only under WATCHED, each event once, with its deterministic id.
    expect(adaRead.status).toBe(200);
    const got = adaRead.events.map(data);
    expect(got.length).toBeGreaterThan(0);
    for (const e of got) {
      expect(isWithin(e.urn, WATCHED), e.urn).toBe(true);
      expect(e.id).toBe(eventIdFor(e.type, e.urn, e.contentHash));
      expect(e.tenant).toBe("acme");
    }
    expect(new Set(got.map((e) => e.id)).size).toBe(got.length);
    const kinds = new Set(got.map((e) => `${e.type} ${e.resourceType}`));
    for (const k of [
      "RESOURCE_PUT common.Message",
      "RESOURCE_PUT plan.Task",
      "RESOURCE_DELETE common.Message",
    ])
      expect(kinds, k).toContain(k);
    // The outputs (the engine's announcements): the two children's and the root's, once each.
    const outputs = got.filter((e) => e.name === "output");
    expect(outputs).toHaveLength(3);
    expect(outputs.filter((e) => rootOutputOf(e.urn))).toHaveLength(1);
    // A task's transcript is not announced.
    expect(got.filter((e) => /^(prompt|turn-|evaluation)/.test(e.name))).toEqual([]);
    expect(got.filter((e) => e.type === "RESOURCE_DELETE").map((e) => e.urn)).toEqual([deleted]);

    // The in-process subscriber saw the same events (each twice: the bus delivers twice).
    offBus();
    const busIds = [...new Set(onBus.map((e) => e.id))].sort();
    expect(busIds).toEqual(got.map((e) => e.id).sort());
    // Every publish is delivered twice; a step the bus ran twice (the plan) wrote the same bytes
    // again and so published the same ids again: harmless to whoever deduplicates on the id. The
    // outputs are published once each.
    const deliveries = new Map<string, number>();
    for (const e of onBus) deliveries.set(e.id, (deliveries.get(e.id) ?? 0) + 1);
    for (const [, n] of deliveries) expect(n % 2).toBe(0);
    for (const o of outputs) expect(deliveries.get(o.id)).toBe(2);

    // The admin's tenant stream: puts of both acme conversations, none of beta, no deletes.
    const all = rootRead.events.map(data);
    expect(all.some((e) => isWithin(e.urn, WATCHED))).toBe(true);
    expect(all.some((e) => isWithin(e.urn, OTHER))).toBe(true);
    expect(all.every((e) => isWithin(e.urn, ACME) && e.type === "RESOURCE_PUT")).toBe(true);
    expect(all.some((e) => e.urn === otherTask)).toBe(true); // its put, not its delete
    // carl follows the tenant, but reads none of ada's conversations: he is told of none of it.
    expect(nosyRead.status).toBe(200);
    expect(
      nosyRead.events.map(data).filter((e) => isWithin(e.urn, WATCHED) || isWithin(e.urn, OTHER)),
    ).toEqual([]);
    expect(nosyRead.comments).toContain("heartbeat");
  });
});

describe("refusals", () => {
  const get = (url: string, key: string | undefined, accept = "text/event-stream") =>
    fetch(url, { headers: { ...(key ? auth(key) : {}), accept } });

  it("refuses another tenant's prefix, `cld:`, a malformed or 10 KB prefix, bad types and unknown parameters", async () => {
    const cases: [string, number, RegExp][] = [
      [streamUrl(BETA_WATCHED), 403, /your own tenant/],
      [streamUrl(`${tenantUrn("beta")}/common.Conversation.never`), 403, /your own tenant/],
      [streamUrl(tenantUrn("beta")), 403, /your own tenant/],
      [streamUrl("cld:common.Tenant.acme2/"), 403, /your own tenant/],
      [streamUrl("cld:"), 400, /not a URN/],
      [streamUrl("cld:common.Tenant"), 400, /not a URN/],
      [streamUrl(`${ACME}/../common.Tenant.beta`), 400, /not a URN/],
      [streamUrl(`${ACME}/${"x".repeat(10 * 1024)}`), 400, /at most 1000/],
      [`${server.url}/v1/resource-events`, 400, /\?prefix=/],
      [streamUrl(WATCHED, "&types=RESOURCE_GET"), 400, /RESOURCE_PUT and\/or RESOURCE_DELETE/],
      [streamUrl(WATCHED, "&since=0"), 400, /not since/],
      // The prefix twice (which one would be followed?), once of another tenant: refused whole.
      [streamUrl(WATCHED, `&prefix=${encodeURIComponent(BETA_WATCHED)}`), 400, /once/],
      [streamUrl(BETA_WATCHED, `&prefix=${encodeURIComponent(WATCHED)}`), 400, /once/],
      [streamUrl(WATCHED, "&types=RESOURCE_PUT&types=RESOURCE_DELETE"), 400, /once/],
      // Encoded twice: `%252F` arrives as `%2F`, which no URN holds.
      [
        `${server.url}/v1/resource-events?prefix=${encodeURIComponent(`${ACME}%2Fcommon.Conversation.c1`)}`,
        400,
        /not a URN/,
      ],
    ];
    for (const [url, status, message] of cases) {
      const res = await get(url, acme.key);
      const body = await res.text();
      expect(res.status, `${url.slice(0, 120)}: ${body}`).toBe(status);
      expect(body).toMatch(message);
    }
    // carl may not read ada's conversation: its prefix is refused by the policy.
    expect((await get(streamUrl(WATCHED), carl.key)).status).toBe(403);
    expect((await get(streamUrl(WATCHED), undefined)).status).toBe(401);
    expect((await get(streamUrl(WATCHED), acme.key, "application/json")).status).toBe(400);
  });

  it("holds a key to its open streams: one more is 429 with Retry-After, and a closed one frees its slot", async () => {
    const streams = [0, 1, 2].map(() => new AbortController());
    const opened = await Promise.all(
      streams.map((c) =>
        fetch(streamUrl(WATCHED), {
          headers: { ...auth(acme.key), accept: "text/event-stream" },
          signal: c.signal,
        }),
      ),
    );
    expect(opened.map((r) => r.status)).toEqual([200, 200, 200]);
    const fourth = await fetch(streamUrl(WATCHED), {
      headers: { ...auth(acme.key), accept: "text/event-stream" },
    });
    expect(fourth.status).toBe(429);
    expect(fourth.headers.get("retry-after")).toBe("5");
    streams[0]?.abort();
    await opened[0]?.body?.cancel().catch(() => {});
    let again = 429;
    for (let i = 0; i < 100 && again === 429; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const c = new AbortController();
      const res = await fetch(streamUrl(WATCHED), {
        headers: { ...auth(acme.key), accept: "text/event-stream" },
        signal: c.signal,
      });
      again = res.status;
      c.abort();
      await res.body?.cancel().catch(() => {});
    }
    expect(again).toBe(200);
    for (const c of streams) c.abort();
    for (const r of opened) await r.body?.cancel().catch(() => {});
    // Every slot comes back once its client has gone: three streams open again.
    let reopened: number[] = [];
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const cs = [0, 1, 2].map(() => new AbortController());
      const rs = await Promise.all(
        cs.map((c) =>
          fetch(streamUrl(WATCHED), {
            headers: { ...auth(acme.key), accept: "text/event-stream" },
            signal: c.signal,
          }),
        ),
      );
      reopened = rs.map((r) => r.status);
      for (const c of cs) c.abort();
      for (const r of rs) await r.body?.cancel().catch(() => {});
      if (reopened.every((s) => s === 200)) break;
    }
    expect(reopened).toEqual([200, 200, 200]);
  });
});

describe("arbor events --prefix", () => {
  it("prints a line for each put and delete under the prefix, until interrupted", async () => {
    const lines: string[] = [];
    const controller = new AbortController();
    const following = followResourceEvents(
      { url: server.url, key: admin.key },
      WATCHED,
      (l) => lines.push(l),
      {
        signal: controller.signal,
      },
    );
    // Until the stream is up, a write is not seen: write until one is.
    const note = withMeta({ type: "common.Message", name: "note", parent: WATCHED });
    for (let i = 0; i < 200 && lines.length === 0; i++) {
      await h.rt.resources.put({ meta: note, role: "user", content: `note ${i}` });
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await h.rt.resources.delete(note.id)).toBe(true);
    for (let i = 0; i < 200 && !lines.some((l) => l.includes("DELETE")); i++)
      await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    await following;
    expect(lines[0]).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ {2}PUT {5}common\.Message {8}cld:common\.Tenant\.acme\//,
    );
    expect(lines.at(-1)).toContain(`DELETE  common.Message        ${note.id}`);
    await expect(
      followResourceEvents({ url: server.url, key: acme.key }, tenantUrn("beta"), () => {}),
    ).rejects.toThrow(/\(403\): .*your own tenant/);
  });
});
