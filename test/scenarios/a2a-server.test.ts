import { randomUUID } from "node:crypto";
import { TaskState } from "@a2a-js/sdk";
import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { createA2aApp, MAX_A2A_BODY_BYTES } from "../../shared/channels/a2a/a2a-server.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { untilRead } from "../support/until.ts";
import {
  ANSWER,
  a2aClient,
  a2aScript,
  ada,
  conversationOf,
  EMAIL,
  intruder,
  keys,
  list,
  partner,
  partsText,
  root,
  rootOf,
  send,
  serveA2a,
  TEAM,
  userMessage,
} from "./a2a-fixtures.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * Arbor as an A2A 1.0 agent, driven by the SDK's own client (ClientFactory + JsonRpcTransportFactory,
 * as Arbor's a2a tool uses it) against the sub-app on @hono/node-server on an ephemeral port, with
 * the engine on the local runtime and a scripted model. Two tenants: acme (a person, ada, and a
 * remote agent, partner) and beta (a remote agent, intruder).
 */
const script = a2aScript(400);
/** The sub-app on the harness's engine (its card names the URL it is served at). */
const start = (options: Parameters<typeof serveA2a>[1] = {}) => serveA2a(h.engine, options);

let h: Harness;
let served: Awaited<ReturnType<typeof start>>;
let url: string;
beforeAll(async () => {
  // Election always finds acme's one assistant: the only questions are approvals of risky calls.
  h = await Harness.create({ script, assistants: TEAM, settings: { electionThreshold: -1 } });
  served = await start();
  url = served.url;
});
afterAll(async () => {
  await served?.close();
  await h?.close();
});
afterEach(async () => {
  await h.idle();
});

const client = (key: string | undefined, at = url) => a2aClient(key, at);

/** JSON-RPC over plain fetch, for what a client library would never send. */
interface RpcBody {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string };
}
async function rpc(
  body: string,
  options: { key?: string | undefined; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; json: RpcBody }> {
  const res = await fetch(`${url}/a2a`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "a2a-version": "1.0",
      ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
      ...options.headers,
    },
    body,
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as RpcBody };
}

const conversations = (tenant: string) => h.rt.resources.descendantUrns(tenantUrn(tenant));

// ---- the tests ------------------------------------------------------------------------------------

describe("the agent card", () => {
  it("is public, names the JSON-RPC interface and the bearer key, and the SDK resolves it", async () => {
    const res = await fetch(`${url}/.well-known/agent-card.json`, { headers: { "A2A-Version": "1.0" } });
    expect(res.status).toBe(200);
    const raw = (await res.json()) as Record<string, unknown>;
    expect(raw).toMatchObject({
      name: "Arbor",
      supportedInterfaces: [
        { url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ],
      securitySchemes: { arborApiKey: { httpAuthSecurityScheme: { scheme: "Bearer" } } },
      securityRequirements: [{ schemes: { arborApiKey: {} } }],
      capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: true },
      skills: [{ id: "run_request", name: expect.any(String), description: expect.any(String) }],
    });
    expect(raw.description).toMatch(/team of LLM agents/);

    // The SDK's 1.0 resolver (it asks with A2A-Version: 1.0) takes the card as it is; its client
    // finds the 1.0 interface in it.
    const card = await new DefaultAgentCardResolver().resolve(url);
    expect(card.name).toBe("Arbor");
    expect(card.supportedInterfaces[0]).toMatchObject({ url: `${url}/a2a`, protocolVersion: "1.0" });
    expect((await client(partner.key)).protocolVersion).toBe("1.0");
  });

  it("names its configured URL, never the Host a request names (the card is cached publicly)", async () => {
    const app = createA2aApp({ engine: h.engine, keys, baseUrl: "https://arbor.example.com/agents" });
    const res = await app.request("http://attacker.example:9999/.well-known/agent-card.json", {
      headers: { host: "attacker.example:9999", "x-forwarded-host": "attacker.example" },
    });
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    const text = await res.text();
    expect(text).not.toContain("attacker");
    const card = JSON.parse(text) as { supportedInterfaces: unknown; url: unknown };
    expect(card.supportedInterfaces).toEqual([
      { url: "https://arbor.example.com/agents/a2a", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
      { url: "https://arbor.example.com/agents/a2a", protocolBinding: "JSONRPC", protocolVersion: "0.3" },
    ]);
    expect(card.url).toBe("https://arbor.example.com/agents/a2a");
  });
});

describe("SendMessage", () => {
  it("blocking: returns the completed task, the answer as its artifact, its id mapped to Arbor's done task", async () => {
    const c = await client(partner.key);
    const task = await send(c, userMessage("What is the cost per person of the offsite?"));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    expect(partsText(task.status?.message?.parts)).toBe("Done: Cost per person");
    // The A2A task is a view of Arbor's request: its root task is done with the same output.
    const { view, output } = await h.engine.result(rootOf(task));
    expect(view?.status).toBe("done");
    expect(output).toBe(ANSWER);
    // The contextId is the conversation's URN, and the message went into it as the partner's request.
    expect(task.contextId).toBe(conversationOf(task));
    expect(task.contextId).toMatch(/^cld:common\.Tenant\.acme\/common\.Conversation\./);
    const [message] = await h.rt.resources.children(task.contextId, "common.Message");
    expect(message).toMatchObject({ role: "user", content: "What is the cost per person of the offsite?" });
    // GetTask says the same.
    const again = await c.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(again.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
  });

  it("continues the caller's own conversation when it passes the contextId back", async () => {
    const c = await client(partner.key);
    const first = await send(c, userMessage("What is the cost per person?"));
    const second = await send(c, userMessage("And for the second day?", { contextId: first.contextId }));
    expect(second.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(second.id).not.toBe(first.id);
    expect(second.contextId).toBe(first.contextId);
    expect(rootOf(second)).not.toBe(rootOf(first));
    const messages = await h.rt.resources.children(first.contextId, "common.Message");
    expect(messages.map((m) => (m as { content?: string }).content)).toEqual([
      "What is the cost per person?",
      "And for the second day?",
    ]);
  });

  it("non-blocking: returns the task at once as the ACK, and GetTask later shows it completed", async () => {
    const c = await client(partner.key);
    const ack = await send(c, userMessage("What is the cost per person?"), true);
    // Recorded, not planned yet: submitted (the ACK holds nothing; GetTask follows Arbor).
    expect(ack.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(rootOf(ack)).toMatch(/\/plan\.Task\./);
    const done = await untilRead(
      "the task to complete",
      () => c.getTask({ tenant: "", id: ack.id, historyLength: undefined }),
      (t) => t.status?.state === TaskState.TASK_STATE_COMPLETED,
    );
    expect(done.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    expect((await h.engine.result(rootOf(ack))).view?.status).toBe("done");
  });

  it("blocking, on a request that takes longer than waitMs: answers with the task working; GetTask follows Arbor", async () => {
    const impatient = await start({ waitMs: 50 });
    try {
      const c = await client(partner.key, impatient.url);
      const task = await send(c, userMessage("Compute the cost per person, slowly"));
      expect(task.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      const done = await untilRead(
        "the task to complete",
        () => c.getTask({ tenant: "", id: task.id, historyLength: undefined }),
        (t) => t.status?.state === TaskState.TASK_STATE_COMPLETED,
      );
      expect(done.artifacts.map((a) => partsText(a.parts))).toEqual([ANSWER]);
    } finally {
      await impatient.close();
    }
  });

  it("keeps a contextId the caller chose itself, as one conversation of its tenant", async () => {
    const c = await client(partner.key);
    const first = await send(c, userMessage("What is the cost per person?", { contextId: "thread-7" }));
    const second = await send(c, userMessage("And per day?", { contextId: "thread-7" }));
    expect([first.contextId, second.contextId]).toEqual(["thread-7", "thread-7"]);
    expect(conversationOf(second)).toBe(conversationOf(first));
    expect(conversationOf(first)).toMatch(/^cld:common\.Tenant\.acme\/common\.Conversation\./);
    expect(await h.rt.resources.children(conversationOf(first), "common.Message")).toHaveLength(2);
  });

  it("a message on a task that is working is refused (it asks nothing), and CancelTask cancels it", async () => {
    const c = await client(partner.key);
    const ack = await send(c, userMessage("Compute the cost per person, slowly"), true);
    expect(ack.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    await expect(send(c, userMessage("hurry up", { taskId: ack.id }))).rejects.toThrow(
      /is not waiting for input: wait until it ends or asks/,
    );
    await untilRead(
      "the request to start",
      async () => (await h.engine.result(rootOf(ack))).view?.status,
      (status) => status === "in_progress",
    );
    const canceled = await c.cancelTask({ tenant: "", id: ack.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await h.idle(); // the model's late answer changes nothing
    expect(h.rt.bus.deadLetters).toEqual([]);
    expect((await h.engine.result(rootOf(ack))).view?.status).toBe("canceled");
    const seen = await c.getTask({ tenant: "", id: ack.id, historyLength: undefined });
    expect(seen.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(seen.artifacts).toEqual([]);
  });
});

describe("input-required", () => {
  it("a risky call surfaces as input-required; a person's follow-up on the task approves it and it completes", async () => {
    const c = await client(ada.key);
    const waiting = await send(c, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const said = waiting.status?.message;
    expect(partsText(said?.parts)).toMatch(/^Allow send_email\?\n\n.*exactly these arguments\.\n\n\{/s);
    expect(partsText(said?.parts)).toMatch(/Answer with one of: approve \(Allow\), deny \(Deny\)\.$/);
    const data = said?.parts.find((p) => p.content?.$case === "data")?.content;
    expect(data?.$case === "data" && data.value).toMatchObject({
      interaction: {
        kind: "confirm",
        purpose: "confirm_risky_action",
        content: EMAIL,
        options: [
          { id: "approve", label: "Allow" },
          { id: "deny", label: "Deny" },
        ],
      },
    });
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("awaiting_user");

    const done = await send(c, userMessage("Allow", { taskId: waiting.id, contextId: waiting.contextId }));
    expect(done.id).toBe(waiting.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partsText(done.artifacts[0]?.parts)).toMatch(/^Emailed the team: /);
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("done");
    // The approval is recorded as ada's, through the engine.
    const [interaction] = (await h.rt.resources.descendants(
      rootOf(waiting),
      "uip.Interaction",
    )) as InteractionResource[];
    expect(interaction?.response).toMatchObject({ selectedOptionId: "approve", actor: "user_ada" });
  });

  it("a remote agent may not approve (the policy refuses, 403), the task still waits, another person does not see it, and an admin of the tenant can", async () => {
    const agent = await client(partner.key);
    const waiting = await send(agent, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);

    const approve = JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "SendMessage",
      params: {
        message: {
          messageId: randomUUID(),
          taskId: waiting.id,
          role: "ROLE_USER",
          parts: [{ text: "approve" }],
        },
      },
    });
    const refused = await rpc(approve, { key: partner.key });
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({
      id: 7,
      error: {
        code: -32000,
        message: expect.stringMatching(
          /^Permission denied: agent_partner may not answer "Allow send_email\?"/,
        ),
      },
    });
    await expect(
      send(agent, userMessage("approve", { taskId: waiting.id, contextId: waiting.contextId })),
    ).rejects.toThrow(/Permission denied/);
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("awaiting_user");
    expect(await h.pending(rootOf(waiting))).toHaveLength(1);

    // A person who did not start it (and is no admin) does not see the task at all.
    await expect(send(await client(ada.key), userMessage("approve", { taskId: waiting.id }))).rejects.toThrow(
      /Task not found/,
    );
    expect(await h.pending(rootOf(waiting))).toHaveLength(1);

    // An answer that fits no option is refused too, and changes nothing.
    const person = await client(root.key);
    await expect(send(person, userMessage("maybe", { taskId: waiting.id }))).rejects.toThrow(
      /That answer does not fit "Allow send_email\?": answer with one of approve \(Allow\), deny \(Deny\)/,
    );
    const denied = await send(person, userMessage("deny", { taskId: waiting.id }));
    expect(denied.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partsText(denied.artifacts[0]?.parts)).toMatch(
      /^Emailed the team: A person declined to run send_email/,
    );
  });

  it("is a view of Arbor's state: answered through another channel, GetTask shows the task completed", async () => {
    const c = await client(partner.key);
    const waiting = await send(c, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const [pending] = await h.pending(rootOf(waiting));
    // A person with the admin role: the request is the partner's, and an agent never answers.
    await h.engine.respond(pending?.meta.id as string, { selectedOptionId: "approve" }, PERSON, {
      roles: ["admin"],
    });
    await h.idle();
    const seen = await c.getTask({ tenant: "", id: waiting.id, historyLength: undefined });
    expect(seen.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(partsText(seen.artifacts[0]?.parts)).toMatch(/^Emailed the team: /);
  });

  it("CancelTask by the owner's tenant cancels Arbor's request", async () => {
    const c = await client(partner.key);
    const waiting = await send(c, userMessage("Email the team about the offsite"));
    const canceled = await c.cancelTask({ tenant: "", id: waiting.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(partsText(canceled.status?.message?.parts)).toBe(
      "Task canceled: canceled over A2A by agent_partner",
    );
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("canceled");
    expect((await c.getTask({ tenant: "", id: waiting.id, historyLength: undefined })).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });
});

describe("who may call", () => {
  it("no key or an unknown key: 401 with WWW-Authenticate, and nothing is submitted", async () => {
    const before = await conversations("acme");
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "SendMessage",
      params: { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hello" }] } },
    });
    const none = await rpc(body);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="arbor"');
    expect(none.json).toMatchObject({
      error: { code: -32000, message: expect.stringMatching(/^Unauthenticated/) },
    });
    const unknown = await rpc(body, { key: "arbor_not-a-key-anyone-was-given" });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get("www-authenticate")).toBe('Bearer realm="arbor", error="invalid_token"');
    // The SDK's client without a key reads the card, then gets the refusal.
    const anonymous = await client(undefined);
    await expect(
      anonymous.sendMessage({
        tenant: "",
        message: userMessage("hello"),
        configuration: undefined,
        metadata: undefined,
      }),
    ).rejects.toThrow(/Unauthenticated/);
    await h.idle();
    expect(await conversations("acme")).toEqual(before);
  });

  it("a beta key can neither read, cancel, answer nor list acme's task, and acme's task is unchanged", async () => {
    const owner = await client(partner.key);
    const waiting = await send(owner, userMessage("Email the team about the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const stranger = await client(intruder.key);
    const notFound = `Task not found: ${waiting.id}`;
    await expect(stranger.getTask({ tenant: "", id: waiting.id, historyLength: undefined })).rejects.toThrow(
      notFound,
    );
    await expect(stranger.cancelTask({ tenant: "", id: waiting.id, metadata: undefined })).rejects.toThrow(
      notFound,
    );
    await expect(send(stranger, userMessage("approve", { taskId: waiting.id }))).rejects.toThrow(notFound);
    // Exactly as for a task that does not exist: nothing tells the two apart.
    await expect(
      stranger.getTask({ tenant: "", id: "no-such-task", historyLength: undefined }),
    ).rejects.toThrow("Task not found: no-such-task");
    const raw = await rpc(
      JSON.stringify({ jsonrpc: "2.0", id: 3, method: "GetTask", params: { id: waiting.id } }),
      {
        key: intruder.key,
      },
    );
    expect(raw.json.error).toEqual(expect.objectContaining({ code: -32001, message: notFound }));
    expect(JSON.stringify(raw.json)).not.toContain("acme");
    expect((await list(stranger)).tasks).toEqual([]);

    // acme's task is where it was: waiting for the same approval, in Arbor and over A2A.
    expect((await h.engine.result(rootOf(waiting))).view?.status).toBe("awaiting_user");
    expect(await h.pending(rootOf(waiting))).toHaveLength(1);
    const seen = await owner.getTask({ tenant: "", id: waiting.id, historyLength: undefined });
    expect(seen.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect((await list(owner)).tasks.map((t) => t.id)).toContain(waiting.id);
  });

  it("a beta key cannot continue acme's conversation: refused as unknown, and nothing is written", async () => {
    const owner = await client(partner.key);
    const first = await send(owner, userMessage("What is the cost per person?"));
    const acmeBefore = await conversations("acme");
    const stranger = await client(intruder.key);
    await expect(
      send(stranger, userMessage("Forward me everything", { contextId: first.contextId })),
    ).rejects.toThrow(
      `No conversation ${first.contextId} for this caller: omit contextId to start a new one`,
    );
    // The same answer for a conversation that does not exist.
    const made_up = `${tenantUrn("acme")}/common.Conversation.nope`;
    await expect(send(stranger, userMessage("hello", { contextId: made_up }))).rejects.toThrow(
      `No conversation ${made_up} for this caller`,
    );
    await h.idle();
    expect(await conversations("acme")).toEqual(acmeBefore);
    expect(await conversations("beta")).toEqual([]);
  });
});

describe("malformed JSON-RPC", () => {
  it("gets the standard errors, and changes nothing", async () => {
    const before = await conversations("acme");
    const key = partner.key;
    const cases: [string, number, unknown][] = [
      ["{not json", -32700, null],
      [JSON.stringify({ jsonrpc: "1.0", id: 1, method: "GetTask", params: { id: "x" } }), -32600, 1],
      [JSON.stringify({ jsonrpc: "2.0", id: 2 }), -32600, 2],
      [JSON.stringify([{ jsonrpc: "2.0", id: 3, method: "GetTask", params: { id: "x" } }]), -32600, null],
      [JSON.stringify({ jsonrpc: "2.0", id: { a: 1 }, method: "GetTask" }), -32600, null],
      [JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tasks/explode", params: {} }), -32601, 4],
      [JSON.stringify({ jsonrpc: "2.0", id: 5, method: "GetTask", params: [] }), -32602, 5],
      [
        JSON.stringify({
          jsonrpc: "2.0",
          id: 6,
          method: "SendMessage",
          params: { message: { role: "ROLE_USER" } },
        }),
        -32602,
        6,
      ],
    ];
    for (const [body, code, id] of cases) {
      const res = await rpc(body, { key });
      expect([body, res.status, res.json]).toEqual([
        body,
        200,
        expect.objectContaining({ id, error: expect.objectContaining({ code }) }),
      ]);
    }
    // Not JSON, a 1.0 method named as 0.3, or a version Arbor does not speak.
    expect((await rpc("{}", { key, headers: { "content-type": "text/plain" } })).json.error?.code).toBe(
      -32005,
    );
    const old = await rpc(JSON.stringify({ jsonrpc: "2.0", id: 8, method: "GetTask", params: { id: "x" } }), {
      key,
      headers: { "a2a-version": "0.3" },
    });
    expect(old.json.error).toMatchObject({
      code: -32601,
      message: expect.stringMatching(/A2A-Version: 1\.0/),
    });
    const future = await rpc(
      JSON.stringify({ jsonrpc: "2.0", id: 8, method: "GetTask", params: { id: "x" } }),
      {
        key,
        headers: { "a2a-version": "2.0" },
      },
    );
    expect(future.json.error?.code).toBe(-32009);
    // Too large: refused before it is read (413), whatever it holds; without a key, 401 first.
    const huge = JSON.stringify({
      jsonrpc: "2.0",
      id: 9,
      method: "SendMessage",
      params: {
        message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "x".repeat(MAX_A2A_BODY_BYTES) }] },
      },
    });
    const tooLarge = await rpc(huge, { key });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.json.error?.code).toBe(-32600);
    expect((await rpc(huge)).status).toBe(401);
    await h.idle();
    expect(await conversations("acme")).toEqual(before);
  });
});

describe("Arbor calling Arbor", () => {
  let caller: Harness | undefined;
  afterAll(async () => {
    await caller?.close();
  });

  it("an assistant's a2a tool delegates to this Arbor, whose answer becomes the caller's output", async () => {
    const delegate: ScriptFunction = (r) => {
      if (isPlan(r))
        return planOf({ name: "Ask Arbor", purpose: "Ask the remote Arbor for the cost per person" });
      if (isEvaluation(r)) return pass();
      const told = [...r.messages].reverse().find((m) => m.role === "tool");
      if (!told)
        return { toolCalls: [{ name: "arbor", arguments: { message: "What is the cost per person?" } }] };
      return { content: `The remote Arbor says: ${told.content}` };
    };
    caller = await Harness.create({
      script: delegate,
      assistants: [{ name: "Delegator", id: "delegator", purpose: "Ask the remote Arbor", tools: ["arbor"] }],
      settings: { electionThreshold: -1 },
      outbound: LOOPBACK_ALLOWED, // the served Arbor is on 127.0.0.1
      toolsConfig: {
        tools: { arbor: { kind: "a2a", url, headers: { authorization: `Bearer ${partner.key}` } } },
      },
    });
    const { rootTaskId } = await caller.submit("What is the cost per person?");
    await caller.idle();
    const { view, output } = await caller.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    // The tool's text: the served Arbor's status message, its answer (the artifact), and where it ran:
    // a task of its own, in a conversation of the tenant the key is for.
    expect(output).toMatch(
      new RegExp(
        `^The remote Arbor says: Done: Cost per person\n\n${ANSWER.replaceAll(".", "\\.")}\n\n` +
          "\\[A2A task [0-9a-f-]{36}, completed; contextId cld:common\\.Tenant\\.acme/common\\.Conversation\\.",
      ),
    );
    const records = await caller.rt.audit.forTask(rootTaskId);
    expect(records.map((r) => `${r.tool}:${r.stage}`)).toEqual(["arbor:requested", "arbor:completed"]);
  });
});
