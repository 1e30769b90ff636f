import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import type { Actor } from "../../shared/domain/events.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { COMMANDS, planMarkerKey } from "../../shared/engine/context.ts";
import type { SubmitRequest } from "../../shared/engine/engine.ts";
import { PLAN_RESEND_AFTER_MS } from "../../shared/engine/steps/submit.ts";
import { ConflictError, ForbiddenError, ValidationError } from "../../shared/kernel/errors.ts";
import { NotifyService } from "../../shared/notify/service.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Engine.submit with an idempotency key (a channel's retry: Slack's event id, an HTTP client's
 * Idempotency-Key) and a conversation name (one conversation per chat thread): a retry writes
 * nothing new and returns the same ids; a crash between the writes is completed by the retry;
 * a named conversation is created once and continued after.
 */
let plans = 0;
const script: ScriptFunction = (r) => {
  if (isPlan(r)) {
    plans++;
    return planOf({ name: "Answer", purpose: "Answer the question" });
  }
  if (isEvaluation(r)) return pass();
  return { content: "Lisbon, 14-15 May." };
};
const BOB: Actor = { id: "user_bob", kind: "human" };

let h: Harness | undefined;
let server: RunningServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
  await h?.close();
  h = undefined;
});

async function world(): Promise<Harness> {
  plans = 0;
  h = await Harness.create({ script, assistants: GENERALIST, settings: { electionThreshold: -1 } });
  return h;
}

/** What a tenant holds: its conversations and messages (URNs), and the plan commands published. */
async function written(w: Harness) {
  const urns = await w.engine.deps.resources.descendantUrns(tenantUrn("acme"));
  return {
    conversations: urns.filter((u) => /common\.Conversation\.[^/]+$/.test(u)).sort(),
    messages: urns.filter((u) => /^cld:[^/]+\/[^/]+\/common\.Message\.[^/]+$/.test(u)).sort(),
  };
}

function countPlanCommands(w: Harness): { n: number } {
  const seen = { n: 0 };
  w.rt.bus.subscribe({
    name: "count-plans",
    pattern: { "detail-type": [COMMANDS.plan] },
    handler: async () => {
      seen.n++;
    },
  });
  return seen;
}

const ask = (extra: Partial<SubmitRequest> = {}): SubmitRequest => ({
  tenant: "acme",
  text: "When is the offsite?",
  actor: PERSON,
  ...extra,
});

describe("a submit without an idempotency key", () => {
  it("names a new conversation and its message by new ids (time-ordered), so a later request's keys sort after", async () => {
    const w = await world();
    const first = await w.engine.submit(ask());
    const second = await w.engine.submit(ask());
    await w.idle();
    const idOf = (urn: string) => urn.slice(urn.lastIndexOf(".") + 1);
    for (const s of [first, second]) {
      const conversation = await w.engine.deps.resources.get(s.conversationUrn);
      const message = await w.engine.deps.resources.get(s.messageUrn);
      // The id is the name the engine gave it, not a hash of it.
      expect(conversation?.meta.name).toBe(idOf(s.conversationUrn));
      expect(message?.meta.name).toBe(idOf(s.messageUrn));
    }
    expect(second.conversationUrn > first.conversationUrn).toBe(true);
    expect(second.rootTaskId > first.rootTaskId).toBe(true);
    expect((await w.engine.result(second.rootTaskId)).output).toBe("Lisbon, 14-15 May.");
  });
});

describe("a submit with an idempotency key", () => {
  it("repeated, returns the same ids and writes nothing new, nor plans twice", async () => {
    const w = await world();
    const commands = countPlanCommands(w);
    const first = await w.engine.submit(ask({ idempotencyKey: "slack:Ev123" }));
    await w.idle();
    const before = await written(w);
    const again = await w.engine.submit(ask({ idempotencyKey: "slack:Ev123" }));
    await w.idle();
    expect(again).toEqual(first);
    expect(await written(w)).toEqual(before);
    expect(before.messages.filter((m) => m.startsWith(first.conversationUrn))).toEqual([first.messageUrn]);
    expect(commands.n).toBe(1);
    expect(plans).toBe(1);
    expect((await w.engine.result(first.rootTaskId)).output).toBe("Lisbon, 14-15 May.");
    // Another key is another message.
    const other = await w.engine.submit(ask({ idempotencyKey: "slack:Ev124" }));
    expect(other.messageUrn).not.toBe(first.messageUrn);
  });

  it("repeated while the first is still being planned, does not send the plan again", async () => {
    const w = await world();
    const commands = countPlanCommands(w);
    const first = await w.engine.submit(ask({ idempotencyKey: "k1" }));
    const again = await w.engine.submit(ask({ idempotencyKey: "k1" }));
    await w.idle();
    expect(again).toEqual(first);
    expect(commands.n).toBe(1);
  });

  it("reused for another text is a conflict, and nothing is written", async () => {
    const w = await world();
    await w.engine.submit(ask({ idempotencyKey: "k2" }));
    await w.idle();
    const before = await written(w);
    await expect(
      w.engine.submit(ask({ idempotencyKey: "k2", text: "Something else" })),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await written(w)).toEqual(before);
  });

  it("a key or conversation name out of bounds is refused before anything is written", async () => {
    const w = await world();
    const before = await written(w);
    for (const bad of [
      { idempotencyKey: "" },
      { idempotencyKey: "x".repeat(201) },
      { conversationName: "has space" },
      { conversationName: "x".repeat(101) },
      { conversationName: "" },
    ])
      await expect(w.engine.submit(ask(bad))).rejects.toBeInstanceOf(ValidationError);
    expect(await written(w)).toEqual(before);
  });

  it("a crash after the message, before the plan marker: the retry completes the request", async () => {
    const w = await world();
    await w.restart();
    const crash = new CrashAt("after-write", "submit");
    await w.open(crash);
    await expect(w.engine.submit(ask({ idempotencyKey: "k3" }))).rejects.toThrow(/simulated crash/);
    await w.restart(); // a new process, no faults
    const mid = await written(w);
    expect(mid.messages).toHaveLength(1);
    const retried = await w.engine.submit(ask({ idempotencyKey: "k3" }));
    await w.idle();
    expect(retried.messageUrn).toBe(mid.messages[0]);
    expect(await written(w)).toEqual(mid);
    expect((await w.engine.result(retried.rootTaskId)).output).toBe("Lisbon, 14-15 May.");
  });

  it("a crash after the plan marker, before the command: a later retry sends it (once)", async () => {
    const w = await world();
    await w.restart();
    await w.open(new CrashAt("before-publish", COMMANDS.plan));
    await expect(w.engine.submit(ask({ idempotencyKey: "k4" }))).rejects.toThrow(/simulated crash/);
    await w.restart();
    const commands = countPlanCommands(w);
    const soon = await w.engine.submit(ask({ idempotencyKey: "k4" }));
    await w.idle();
    // Just after: it may be being planned; the command is not sent twice.
    expect(commands.n).toBe(0);
    expect((await w.engine.deps.state.get(planMarkerKey(soon.messageUrn)))?.status).toBe("requested");
    w.advance(PLAN_RESEND_AFTER_MS);
    const later = await w.engine.submit(ask({ idempotencyKey: "k4" }));
    await w.idle();
    expect(later).toEqual(soon);
    expect(commands.n).toBe(1);
    expect((await w.engine.result(later.rootTaskId)).output).toBe("Lisbon, 14-15 May.");
    expect(plans).toBe(1);
  });
});

describe("a submit with a conversation name", () => {
  it("creates the conversation (started by the actor), then continues it; another person is refused", async () => {
    const w = await world();
    const first = await w.engine.submit(ask({ conversationName: "slack-T1-C1-1700000000_0001" }));
    expect(first.conversationUrn).toBe(
      "cld:common.Tenant.acme/common.Conversation.slack-T1-C1-1700000000_0001",
    );
    const conversation = await w.engine.deps.resources.getAs("common.Conversation", first.conversationUrn);
    expect(conversation?.startedBy).toBe(PERSON.id);
    const second = await w.engine.submit(
      ask({ conversationName: "slack-T1-C1-1700000000_0001", text: "And?" }),
    );
    expect(second.conversationUrn).toBe(first.conversationUrn);
    expect(second.messageUrn).not.toBe(first.messageUrn);
    await expect(
      w.engine.submit(ask({ conversationName: "slack-T1-C1-1700000000_0001", actor: BOB })),
    ).rejects.toBeInstanceOf(ForbiddenError);
    // An admin may continue anybody's.
    const admin = await w.engine.submit(
      ask({ conversationName: "slack-T1-C1-1700000000_0001", actor: BOB, roles: ["admin"], text: "Admin" }),
    );
    expect(admin.conversationUrn).toBe(first.conversationUrn);
    await w.idle();
  });

  it("two first messages racing both land in one conversation", async () => {
    const w = await world();
    const [a, b] = await Promise.all([
      w.engine.submit(ask({ conversationName: "race", idempotencyKey: "a", text: "One" })),
      w.engine.submit(ask({ conversationName: "race", idempotencyKey: "b", text: "Two" })),
    ]);
    expect(a.conversationUrn).toBe(b.conversationUrn);
    expect(a.messageUrn).not.toBe(b.messageUrn);
    const conversation = await w.engine.deps.resources.getAs("common.Conversation", a.conversationUrn);
    expect(conversation?.startedBy).toBe(PERSON.id);
    // Somebody else racing in loses as a second message would: refused, nothing of theirs written.
    const [c, d] = await Promise.allSettled([
      w.engine.submit(ask({ conversationName: "race2", text: "Ada's" })),
      w.engine.submit(ask({ conversationName: "race2", actor: BOB, text: "Bob's" })),
    ]);
    const won = [c, d].filter((r) => r.status === "fulfilled");
    expect(won).toHaveLength(1);
    const lost = [c, d].find((r) => r.status === "rejected");
    expect(lost?.reason).toBeInstanceOf(ForbiddenError);
    await w.idle();
  });
});

describe("POST /v1/messages with an Idempotency-Key", () => {
  it("twice: the same 202 body, one message", async () => {
    const w = await world();
    const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
    server = await serveHttp({ engine: w.engine, keys: new ApiKeys({ keys: [ada.entry] }) });
    const post = async (key: string | undefined) => {
      const res = await fetch(`${server?.url}/v1/messages`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${ada.key}`,
          "content-type": "application/json",
          ...(key === undefined ? {} : { "idempotency-key": key }),
        },
        body: JSON.stringify({ text: "When is the offsite?" }),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const first = await post("retry-me-1");
    const before = await written(w);
    const second = await post("retry-me-1");
    expect(first.status).toBe(202);
    expect(second).toEqual(first);
    expect(await written(w)).toEqual(before);
    const bad = await post("x".repeat(201));
    expect(bad.status).toBe(400);
    expect(await written(w)).toEqual(before);
    await w.idle();
  });

  it("is the caller's own: a colleague reusing the key string gets a request of their own, not a 403 naming the first one's", async () => {
    const w = await world();
    const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
    const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
    server = await serveHttp({ engine: w.engine, keys: new ApiKeys({ keys: [ada.entry, bob.entry] }) });
    const post = async (key: string) => {
      const res = await fetch(`${server?.url}/v1/messages`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "idempotency-key": "order-42",
        },
        body: JSON.stringify({ text: "When is the offsite?" }),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const mine = await post(ada.key);
    const theirs = await post(bob.key);
    expect([mine.status, theirs.status]).toEqual([202, 202]);
    expect(theirs.body.conversationUrn).not.toBe(mine.body.conversationUrn);
    expect(theirs.body.rootTaskId).not.toBe(mine.body.rootTaskId);
    expect(JSON.stringify(theirs.body)).not.toContain(String(mine.body.conversationUrn));
    // Each retry still finds its own.
    expect(await post(bob.key)).toEqual(theirs);
    expect(await post(ada.key)).toEqual(mine);
    await w.idle();
  });

  it("a crash between the submit and the callback's subscription: the retry subscribes it", async () => {
    const w = await world();
    const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
    const notify = new NotifyService({ deps: w.engine.deps, urls: notifyUrls() });
    server = await serveHttp({ engine: w.engine, keys: new ApiKeys({ keys: [ada.entry] }), notify });
    // The first POST got as far as the submit, then the process died: no subscription.
    const text = "When is the offsite?";
    const first = await w.engine.submit(ask({ text, idempotencyKey: "cb-1", idempotencyScope: "user_ada" }));
    expect(await notify.subscriptions(first.rootTaskId)).toEqual([]);
    const res = await fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${ada.key}`,
        "content-type": "application/json",
        "idempotency-key": "cb-1",
      },
      body: JSON.stringify({ text, callbackUrl: "https://hooks.example.com/arbor" }),
    });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ ...first });
    const subs = await notify.subscriptions(first.rootTaskId);
    expect(subs.map((r) => r.data.subscription)).toMatchObject([
      { kind: "callback", url: "https://hooks.example.com/arbor" },
    ]);
    await w.idle();
  });
});
