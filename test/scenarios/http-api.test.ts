import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import { createHttpApi } from "../../shared/channels/http/http-api.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { Engine } from "../../shared/engine/engine.ts";
import {
  ConflictError,
  ModelError,
  NotFoundError,
  ThrottledError,
  UnavailableError,
} from "../../shared/kernel/errors.ts";
import { readAllEvents } from "../../shared/ports/state-store.ts";
import { fetchApi } from "../support/http.ts";
import type { Harness } from "./engine-harness.ts";
import { acme, beta, twoTenantServer } from "./http-fixture.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * The HTTP API as a client sees it: the real server (@hono/node-server) on an ephemeral port, real
 * fetch, two tenants (acme, beta) with a key each, the engine on the local runtime with a scripted
 * model. (`arbor keys add` and `arbor serve` as real processes: keys-cli.test.ts.)
 */
const ANSWER = "The offsite is in Lisbon, 14-15 May.";
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: ANSWER };
};

let h: Harness;
let server: RunningServer;

beforeAll(async () => {
  ({ h, server } = await twoTenantServer(script));
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

const enc = encodeURIComponent;
const api = (
  method: string,
  path: string,
  options: {
    key?: string;
    body?: unknown;
    raw?: string | ReadableStream;
    headers?: Record<string, string>;
  } = {},
) => fetchApi<ApiBody>(server.url, method, path, options.key, options.raw ?? options.body, options.headers);

/** What the API's responses carry, as the assertions read them (each route fills some of it). */
interface ApiBody {
  status?: string;
  error: { code: string; message: string; details: { issues: string[] } };
  conversationUrn: string;
  messageUrn: string;
  rootTaskId: string;
  taskId?: string;
  links: { task: string };
  task: { status: string; createdBy?: string };
  output: string | null;
  interactions: Interaction[];
}
interface Interaction {
  urn: string;
  purpose: string;
  taskId: string;
  options: { id: string }[];
  links: { answer: string };
}

const submit = (key: string, body: Record<string, unknown>) => api("POST", "/v1/messages", { key, body });
const getTask = (key: string, urn: string) => api("GET", `/v1/tasks/${enc(urn)}`, { key });
const interactionsOf = (key: string, urn: string) =>
  api("GET", `/v1/tasks/${enc(urn)}/interactions`, { key });

/** Polls GET /v1/tasks/:urn until `done(status)` (or 10 s pass). */
async function pollTask(key: string, urn: string, until: (status: string) => boolean) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const res = await getTask(key, urn);
    expect(res.status).toBe(200);
    if (until(res.json.task.status) || Date.now() > deadline) return res.json;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Everything stored under a tenant and every event: to prove a refused request wrote nothing. */
async function snapshot(tenant: string) {
  await h.idle();
  let events = 0;
  for await (const _ of readAllEvents(h.rt.state)) events++;
  return { resources: await h.rt.resources.descendantUrns(tenantUrn(tenant)), events };
}

describe("HTTP API: who calls", () => {
  it("answers /healthz without a key, and 401 under /v1 without a key or with a wrong one, saying how to get one", async () => {
    expect(await api("GET", "/healthz")).toMatchObject({ status: 200, json: { status: "ok" } });
    const before = await snapshot("acme");
    const cases = [
      {},
      { key: "arbor_thisKeyWasNeverIssuedByAnyone000" },
      { headers: { authorization: `Basic ${acme.key}` } },
    ];
    for (const options of cases) {
      const res = await api("POST", "/v1/messages", { ...options, body: { text: "hello" } });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(res.json.error).toMatchObject({ code: "UNAUTHENTICATED" });
      expect(res.json.error.message).toMatch(/arbor keys add/);
    }
    expect((await api("GET", `/v1/tasks/${enc(tenantUrn("acme"))}`)).status).toBe(401);
    expect(await snapshot("acme")).toEqual(before);
  });
});

describe("HTTP API: a request from message to answer", () => {
  it("submits (202 with links), and the task polled over GET ends with the scripted answer", async () => {
    const res = await submit(acme.key, { text: "Where is the offsite?", title: "Offsite" });
    expect(res.status).toBe(202);
    const { conversationUrn, messageUrn, rootTaskId, links } = res.json;
    expect(conversationUrn).toMatch(/^cld:common\.Tenant\.acme\/common\.Conversation\./);
    expect(messageUrn.startsWith(`${conversationUrn}/common.Message.`)).toBe(true);
    expect(links.task).toBe(`/v1/tasks/${enc(rootTaskId)}`);
    expect(res.headers.get("location")).toBe(links.task);

    const done = await pollTask(acme.key, rootTaskId, (s) => s === "done");
    expect(done).toMatchObject({ task: { taskId: rootTaskId, status: "done" }, output: ANSWER });
    expect(done.task.createdBy).toBeDefined();
    // The message is stored as sent, by the key's person, under the key's tenant.
    expect(await h.rt.resources.get(messageUrn)).toMatchObject({
      role: "user",
      content: "Where is the offsite?",
    });

    // A follow-up in the same conversation.
    const again = await submit(acme.key, { text: "And the dinner?", conversationUrn });
    expect(again).toMatchObject({ status: 202, json: { conversationUrn } });
    await pollTask(acme.key, again.json.rootTaskId, (s) => s === "done");
    // Canceling a finished task is refused: its answer stays.
    const cancel = await api("POST", `/v1/tasks/${enc(rootTaskId)}/cancel`, { key: acme.key });
    expect(cancel).toMatchObject({ status: 409, json: { error: { code: "CONFLICT" } } });
    expect((await getTask(acme.key, rootTaskId)).json.output).toBe(ANSWER);
  });

  it("lazy mode: the plan's approval is listed and answered over HTTP, and the task finishes", async () => {
    const { json } = await submit(acme.key, { text: "Plan it, but ask me first", mode: "lazy" });
    await pollTask(acme.key, json.rootTaskId, (s) => s === "awaiting_user");
    const listed = await interactionsOf(acme.key, json.rootTaskId);
    expect(listed.status).toBe(200);
    expect(listed.json.interactions).toHaveLength(1);
    const approval = listed.json.interactions[0] as Interaction;
    expect(approval).toMatchObject({ purpose: "approve_plan", taskId: json.rootTaskId });
    expect(approval.options.map((o: { id: string }) => o.id)).toContain("approve");

    // An answer that does not fit is refused and changes nothing.
    const wrong = await api("POST", approval.links.answer, {
      key: acme.key,
      body: { selectedOptionId: "maybe" },
    });
    expect(wrong).toMatchObject({ status: 400, json: { error: { code: "VALIDATION" } } });
    expect(wrong.json.error.message).toMatch(/selectedOptionId must be one of/);

    const answered = await api("POST", approval.links.answer, {
      key: acme.key,
      body: { selectedOptionId: "approve" },
    });
    expect(answered.status).toBe(204);
    const done = await pollTask(acme.key, json.rootTaskId, (s) => s === "done");
    expect(done).toMatchObject({ task: { status: "done" }, output: ANSWER });
    expect((await interactionsOf(acme.key, json.rootTaskId)).json.interactions).toEqual([]);
    // The same answer twice: the interaction is no longer pending.
    const twice = await api("POST", approval.links.answer, {
      key: acme.key,
      body: { selectedOptionId: "approve" },
    });
    expect(twice).toMatchObject({ status: 409, json: { error: { code: "CONFLICT" } } });
  });
});

describe("HTTP API: tenants", () => {
  it("a beta key gets 404 on acme's task (read, interactions, answer, cancel) and conversation, and acme's work is unchanged", async () => {
    const { json } = await submit(acme.key, { text: "Our secret plan", mode: "lazy" });
    const { rootTaskId, conversationUrn } = json;
    await pollTask(acme.key, rootTaskId, (s) => s === "awaiting_user");
    const approval = (await interactionsOf(acme.key, rootTaskId)).json.interactions[0] as Interaction;
    const before = await snapshot("acme");
    const view = (await getTask(acme.key, rootTaskId)).json;

    const refused = [
      await getTask(beta.key, rootTaskId),
      await interactionsOf(beta.key, rootTaskId),
      await api("POST", approval.links.answer, { key: beta.key, body: { selectedOptionId: "approve" } }),
      await api("POST", `/v1/tasks/${enc(rootTaskId)}/cancel`, { key: beta.key, body: { reason: "mine" } }),
      await submit(beta.key, { text: "I am acme now", conversationUrn }),
    ];
    // Another tenant's work is answered as work that does not exist (see tenant-oracle.test.ts).
    for (const res of refused) {
      expect(res.status).toBe(404);
      expect(res.json.error.code).toBe("NOT_FOUND");
      expect(res.json.error.message).toMatch(/^(Task|Interaction|Conversation) not found: cld:/);
      expect(JSON.stringify(res.json)).not.toContain("secret");
    }
    // The request cannot choose its tenant: a tenant field is refused as unknown.
    const chosen = await submit(beta.key, { text: "hi", tenant: "acme" });
    expect(chosen).toMatchObject({ status: 400, json: { error: { code: "VALIDATION" } } });

    expect(await snapshot("acme")).toEqual(before);
    expect((await getTask(acme.key, rootTaskId)).json).toEqual(view);
    expect((await interactionsOf(acme.key, rootTaskId)).json.interactions).toEqual([approval]);

    // Acme's own person cancels it over HTTP.
    const cancel = await api("POST", `/v1/tasks/${enc(rootTaskId)}/cancel`, {
      key: acme.key,
      body: { reason: "not now" },
    });
    expect(cancel).toMatchObject({ status: 202, json: { taskId: rootTaskId } });
    const canceled = await pollTask(acme.key, rootTaskId, (s) => s === "canceled");
    expect(canceled.task.status).toBe("canceled");
  });
});

describe("HTTP API: bad input changes nothing", () => {
  it("refuses malformed JSON, unknown or invalid fields, oversized bodies, bad URNs and unknown tasks and routes", async () => {
    // A conversation of ada's own: what is unknown in it is a 404 to her.
    const mine = (await submit(acme.key, { text: "Where is the offsite?" })).json;
    await pollTask(acme.key, mine.rootTaskId, (s) => s === "done");
    const before = await snapshot("acme");
    const post = (raw: string | ReadableStream) => api("POST", "/v1/messages", { key: acme.key, raw });

    const malformed = await post("{not json");
    expect(malformed).toMatchObject({ status: 400, json: { error: { code: "VALIDATION" } } });
    expect(malformed.json.error.message).toMatch(/not valid JSON/);

    const unknown = await submit(acme.key, { text: "hi", priority: "high" });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toMatch(/Unrecognized key: "priority"/);
    expect(unknown.json.error.details.issues).toEqual(['(root): Unrecognized key: "priority"']);

    for (const body of [{}, { text: "" }, { text: "x".repeat(100_001) }, { text: "hi", mode: "later" }]) {
      const res = await submit(acme.key, body);
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe("VALIDATION");
    }

    // JSON nested deeper than every channel takes (shared/domain/input-limits.ts): a 400, not a crash.
    const deep = await post(`{"text":"hi","title":${"[".repeat(5000)}${"]".repeat(5000)}}`);
    expect(deep).toMatchObject({ status: 400, json: { error: { code: "VALIDATION" } } });
    expect(deep.json.error.message).toMatch(/nests deeper than 64 levels/);

    const big = JSON.stringify({ text: "x".repeat(300_000) });
    const tooLarge = await post(big);
    expect(tooLarge).toMatchObject({ status: 413, json: { error: { code: "TOO_LARGE" } } });
    // The rest of that body was never read: the connection is not reused for the next request.
    expect(tooLarge.headers.get("connection")).toBe("close");
    // The same without a Content-Length (chunked): counted as it arrives.
    const chunks = new TextEncoder().encode(big);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < chunks.length; i += 64 * 1024) controller.enqueue(chunks.slice(i, i + 64 * 1024));
        controller.close();
      },
    });
    expect((await post(stream)).status).toBe(413);

    const missing = `${mine.conversationUrn}/common.Message.m/plan.Task.nope`;
    expect(await getTask(acme.key, missing)).toMatchObject({
      status: 404,
      json: { error: { code: "NOT_FOUND" } },
    });
    expect((await interactionsOf(acme.key, missing)).status).toBe(404);
    expect((await api("POST", `/v1/tasks/${enc(missing)}/cancel`, { key: acme.key })).status).toBe(404);
    expect(
      (
        await api("POST", `/v1/interactions/${enc(`${missing}/uip.Interaction.x`)}/answer`, {
          key: acme.key,
          body: { selectedOptionId: "approve" },
        })
      ).status,
    ).toBe(404);
    // No URN at all is outside the tenant too: not found; a malformed one of the tenant is a 400.
    expect(await getTask(acme.key, "not-a-urn")).toMatchObject({
      status: 404,
      json: { error: { code: "NOT_FOUND" } },
    });
    expect(await getTask(acme.key, `${tenantUrn("acme")}/not an element`)).toMatchObject({
      status: 400,
      json: { error: { code: "INVALID_URN" } },
    });
    // A conversation she did not start (here: none at all) is refused whether or not it exists.
    expect(
      await submit(acme.key, {
        text: "hi",
        conversationUrn: `${tenantUrn("acme")}/common.Conversation.nope`,
      }),
    ).toMatchObject({ status: 403, json: { error: { code: "FORBIDDEN" } } });

    for (const [method, path] of [
      ["GET", "/v1/nowhere"],
      ["DELETE", `/v1/tasks/${enc(missing)}`],
      ["GET", "/nowhere"],
    ] as const) {
      const res = await api(method, path, { key: acme.key });
      expect(res).toMatchObject({ status: 404, json: { error: { code: "NOT_FOUND" } } });
    }
    expect(await snapshot("acme")).toEqual(before);
  });

  it("maps error codes to statuses in one place, and hides unexpected errors behind a logged 500", async () => {
    const logged: unknown[] = [];
    let failure: Error = new Error("unset");
    const engine = {
      result: async () => {
        throw failure;
      },
    } as unknown as Engine;
    const app = createHttpApi({
      engine,
      keys: new ApiKeys({ keys: [acme.entry] }),
      log: { error: (...args: unknown[]) => void logged.push(args) } as never,
    });
    const get = async () => {
      const res = await app.request(`/v1/tasks/${enc(tenantUrn("acme"))}`, {
        headers: { authorization: `Bearer ${acme.key}` },
      });
      return { status: res.status, json: (await res.json()) as { error: { code: string; message: string } } };
    };
    const cases: [Error, number, string][] = [
      [new NotFoundError("Task", "t"), 404, "NOT_FOUND"],
      [new ConflictError("lost a race"), 409, "CONFLICT"],
      [new ThrottledError("slow down"), 429, "THROTTLED"],
      [new UnavailableError("disk away"), 503, "UNAVAILABLE"],
      [new ModelError("the model refused"), 500, "INTERNAL"],
      [new Error("secret stack detail"), 500, "INTERNAL"],
    ];
    for (const [error, status, code] of cases) {
      failure = error;
      const res = await get();
      expect(res.status).toBe(status);
      expect(res.json.error.code).toBe(code);
      if (status === 500) expect(res.json.error.message).not.toMatch(/secret|refused/);
    }
    expect(logged).toHaveLength(2);
  });
});
