import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { ConfigError, ValidationError } from "../../shared/kernel/errors.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import type { ToolContext } from "../../shared/ports/tools.ts";
import type { LocalRuntime } from "../../shared/runtime/local/local.ts";
import { idempotencyKeyOf } from "../../shared/tools/service/call-record.ts";
import { parseToolsConfig } from "../../shared/tools/service/config.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { type A2aAgentPeer, startA2aAgent } from "../peers/a2a-agent.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED, openToolWorld, type ToolWorld } from "./tool-world.ts";

/**
 * A2A tools end to end: a remote agent written with the SDK's server side (test/peers/a2a-agent.ts)
 * on a real HTTP port, called through the tool service by the SDK's client, then delegated to by an
 * assistant in a local run.
 */
const TOKEN = "s3cret-token";
const TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
const ASSISTANT = `${tenantUrn("acme")}/common.Assistant.a1`;
let calls = 0;
const ctx = (): ToolContext => ({ taskId: TASK, actor: ASSISTANT, callId: `call_${++calls}` });
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let peer: A2aAgentPeer;
beforeAll(async () => {
  peer = await startA2aAgent({ token: TOKEN, slowMs: 5_000, backgroundMs: 300 });
});
afterAll(async () => {
  await peer.close();
});

let world: ToolWorld;
let rt: LocalRuntime;
let open: ToolService[] = [];
beforeEach(async () => {
  world = await openToolWorld("arbor-a2a-");
  rt = world.rt;
  peer.behaviour = "message";
  peer.messages.length = 0;
  peer.requests.length = 0;
});
afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
  open = [];
  await world.close();
});

async function service(config: unknown): Promise<ToolService> {
  const s = await ToolService.open(config, world.options({ defaultTimeoutMs: 5_000 }));
  open.push(s);
  return s;
}

const desk = (extra: Record<string, unknown> = {}) => ({
  tools: {
    venue_desk: {
      kind: "a2a",
      url: peer.url,
      headers: { authorization: `Bearer ${TOKEN}`, "x-team": "events" },
      ...extra,
    },
  },
});
const audit = async () =>
  (await rt.audit.forTask(TASK)).map((r) => `${r.tool}:${r.stage}${r.reason ? `:${r.reason}` : ""}`);
const rpcCalls = () => peer.requests.filter((r) => r.rpcMethod).map((r) => r.rpcMethod);

describe("A2A tools", () => {
  it("describes the agent from its card, sends exactly the model's message with the configured headers, and returns the answer", async () => {
    const tools = await service(desk());
    const [d] = tools.describe(["venue_desk"]);
    expect(d).toMatchObject({ name: "venue_desk", kind: "a2a", pure: false, risky: false });
    expect(d?.description).toMatch(
      /^Delegates a request to the remote agent "Venue desk": Books venues for team events in Lisbon and Porto\.\nIts skills:\n- Find venues: Finds venues with free seats for a team and a date\.\n/,
    );
    expect(d?.parameters).toEqual({
      type: "object",
      properties: {
        message: { type: "string", description: "what to ask the agent" },
        contextId: expect.objectContaining({ type: "string" }),
      },
      required: ["message"],
      additionalProperties: false,
    });
    // The token is for the agent, never for the model.
    expect(JSON.stringify(tools.list())).not.toContain(TOKEN);

    const asked = "Find a venue for 12 people in Lisbon on 12 June";
    const context = ctx();
    const result = await tools.execute("venue_desk", { message: asked }, context);
    expect(result.isError).toBeUndefined();
    expect(result.content).toMatch(
      /^Answer to "Find a venue for 12 people in Lisbon on 12 June": Casa do Rio, seats 40\.\n\n\[A2A message; contextId [0-9a-f-]{36}\]$/,
    );

    // On the wire: exactly what the model said, as one text part of a user message with a fresh id,
    // sent blocking (returnImmediately at its default, false: the call waits for the answer); the
    // metadata carries the call's idempotency key (the same on a repeat of the call) and attempt.
    const params = peer.requests.find((r) => r.rpcMethod === "SendMessage")?.params;
    expect(params).toEqual({
      message: {
        messageId: expect.stringMatching(UUID),
        role: "ROLE_USER",
        parts: [{ text: asked, mediaType: "text/plain" }],
        metadata: { arbor: { idempotencyKey: idempotencyKeyOf(TASK, context.callId), attempt: 1 } },
      },
      configuration: { historyLength: 0 },
    });
    expect(peer.messages).toEqual([
      {
        messageId: (params as { message: { messageId: string } } | undefined)?.message.messageId,
        role: "ROLE_USER",
        contextId: expect.stringMatching(UUID),
        taskId: expect.any(String),
        parts: [asked],
        blocking: true,
      },
    ]);
    expect(await audit()).toEqual(["venue_desk:requested", "venue_desk:completed"]);

    // The configured headers went with every request: the card's at open, then the call's.
    expect(peer.requests.map((r) => `${r.method} ${r.path} ${r.rpcMethod ?? ""}`.trim())).toEqual([
      "GET /.well-known/agent-card.json",
      "POST /a2a/jsonrpc SendMessage",
    ]);
    for (const r of peer.requests)
      expect(r.headers).toMatchObject({ authorization: `Bearer ${TOKEN}`, "x-team": "events" });
    // The protocol's own headers are the SDK's, not overridden.
    expect(peer.requests[1]?.headers).toMatchObject({
      "a2a-version": "1.0",
      "content-type": "application/json",
    });
  });

  it("continues a conversation when the model passes the contextId it got back, with a new message id", async () => {
    const tools = await service(desk());
    const first = await tools.execute("venue_desk", { message: "Find a venue in Porto" }, ctx());
    const contextId = /contextId ([0-9a-f-]{36})/.exec(first.content)?.[1];
    expect(contextId).toMatch(UUID);
    await tools.execute("venue_desk", { message: "And one in Lisbon?", contextId }, ctx());
    expect(peer.messages.map((m) => [m.parts[0], m.contextId])).toEqual([
      ["Find a venue in Porto", contextId],
      ["And one in Lisbon?", contextId],
    ]);
    expect(peer.messages[0]?.messageId).not.toBe(peer.messages[1]?.messageId);
  });

  it("takes the agent card's URL as well as the agent's base URL, and a configured description over the card's", async () => {
    const tools = await service(desk({ url: peer.cardUrl, description: "Ask the venue desk." }));
    expect(tools.describe(["venue_desk"])[0]?.description).toBe("Ask the venue desk.");
    expect(peer.requests[0]).toMatchObject({ method: "GET", path: "/.well-known/agent-card.json" });
    expect((await tools.execute("venue_desk", { message: "Any venue?" }, ctx())).content).toMatch(
      /^Answer to "Any venue\?"/,
    );
  });

  it("returns a completed task's status message and artifact text, with the remote task id", async () => {
    peer.behaviour = "task";
    const tools = await service(desk());
    const result = await tools.execute("venue_desk", { message: "Venues in Lisbon" }, ctx());
    expect(result.isError).toBeUndefined();
    expect(result.content).toMatch(
      /^Found 2 venues\.\n\nVenues for "Venues in Lisbon": Casa do Rio \(40 seats\), Sala Norte \(16 seats\)\.\n\n\[A2A task [0-9a-f-]{36}, completed; contextId [0-9a-f-]{36}\]$/,
    );
    expect(rpcCalls()).toEqual(["SendMessage"]);
    expect(await audit()).toEqual(["venue_desk:requested", "venue_desk:completed"]);
  });

  it("polls a task the agent hands back still working until it completes", async () => {
    peer.behaviour = "background";
    const tools = await service(desk());
    const result = await tools.execute("venue_desk", { message: "Venues in Porto" }, ctx());
    expect(result.content).toMatch(
      /^Found 2 venues \(in the background\)\.\n\nVenues for "Venues in Porto": .*\n\n\[A2A task [0-9a-f-]{36}, completed;/,
    );
    const rpc = rpcCalls();
    expect(rpc[0]).toBe("SendMessage");
    expect(rpc.length).toBeGreaterThan(1);
    expect(new Set(rpc.slice(1))).toEqual(new Set(["GetTask"]));
    // Every poll carried the configured headers too.
    for (const r of peer.requests) expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it.each([
    [
      "failed",
      /^venue_desk failed: the agent's task ended failed: The booking system is down\. \[A2A task [0-9a-f-]{36}, failed;/,
    ],
    [
      "rejected",
      /^venue_desk failed: the agent's task ended rejected: I only book venues in Lisbon and Porto\./,
    ],
    [
      "input-required",
      /^venue_desk failed: the agent needs more input: For which date\? \[A2A task [0-9a-f-]{36}, input-required; .*\]\. Nobody can answer it from here: send a new message that already contains what it asks for$/,
    ],
    [
      "auth-required",
      /^venue_desk failed: the agent needs authentication: Sign in to the booking system first\. .*credentials \(headers\) in this tool's configuration/,
    ],
  ] as const)(
    "a task that ends %s is a tool error the model can read, audited as failed",
    async (behaviour, error) => {
      peer.behaviour = behaviour;
      const tools = await service(desk());
      const result = await tools.execute("venue_desk", { message: "Book Casa do Rio" }, ctx());
      expect(result).toEqual({ content: expect.stringMatching(error), isError: true });
      expect(await audit()).toEqual(["venue_desk:requested", "venue_desk:failed:error"]);
      expect(peer.messages.map((m) => m.parts)).toEqual([["Book Casa do Rio"]]);
    },
  );

  it("ends a call that takes longer than the entry's timeoutMs as a timeout", async () => {
    peer.behaviour = "slow";
    const tools = await service(desk({ timeoutMs: 400 }));
    const started = performance.now();
    const result = await tools.execute("venue_desk", { message: "Call every venue" }, ctx());
    expect(performance.now() - started).toBeLessThan(3_000); // the agent would take 5 s
    expect(result).toEqual({ content: "venue_desk did not finish within 400 ms", isError: true });
    expect(await audit()).toEqual(["venue_desk:requested", "venue_desk:failed:timeout"]);
    expect(peer.messages).toHaveLength(1);
  });

  it("refuses invalid arguments before anything reaches the agent", async () => {
    const tools = await service(desk());
    peer.requests.length = 0; // the card's fetch at open
    const cases: [Record<string, unknown>, string][] = [
      [{}, "Invalid arguments for venue_desk: message: is required"],
      [
        { message: "hi", extra: 1 },
        "Invalid arguments for venue_desk: extra: is not a parameter of this tool",
      ],
      [{ message: 42 }, "Invalid arguments for venue_desk: message: must be string"],
    ];
    for (const [args, error] of cases)
      expect(await tools.execute("venue_desk", args, ctx())).toEqual({ content: error, isError: true });
    expect(peer.requests).toEqual([]);
    expect(peer.messages).toEqual([]);
    expect(await audit()).toEqual([
      "venue_desk:failed:invalid_arguments",
      "venue_desk:failed:invalid_arguments",
      "venue_desk:failed:invalid_arguments",
    ]);
  });
});

describe("A2A configuration", () => {
  it("fails open, naming the tool and the card URL, when the card cannot be fetched", async () => {
    // A port nothing listens on (one that was free a moment ago).
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const unreachable = service({ tools: { venue_desk: { kind: "a2a", url: `http://127.0.0.1:${port}` } } });
    await expect(unreachable).rejects.toBeInstanceOf(ConfigError);
    await expect(unreachable).rejects.toThrow(
      new RegExp(
        `^tools\\.venue_desk: the A2A agent card at http://127\\.0\\.0\\.1:${port}/\\.well-known/agent-card\\.json ` +
          `cannot be fetched \\(fetch failed: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\): check the url in the ` +
          "tool configuration .*that the agent is running, and the headers it needs$",
      ),
    );
    // Reachable, but without the token the agent wants.
    await expect(service({ tools: { venue_desk: { kind: "a2a", url: peer.url } } })).rejects.toThrow(
      /tools\.venue_desk: the A2A agent card at .* cannot be fetched \(.*401.*\): .*the headers it needs/,
    );
    // Something that answers, but not with an agent card.
    await expect(service(desk({ url: `${peer.url}/no-such-card.json` }))).rejects.toThrow(
      /tools\.venue_desk: the A2A agent card at .*\/no-such-card\.json cannot be fetched \(.*404/,
    );
  });

  it("says when the card is not an A2A 1.0 card, or offers no transport Arbor speaks", async () => {
    const cards: Record<string, unknown> = {
      "/v03.json": { name: "Old desk", url: "http://127.0.0.1:1/a2a", preferredTransport: "JSONRPC" },
      "/grpc.json": {
        name: "Grpc desk",
        supportedInterfaces: [
          { url: "127.0.0.1:1", protocolBinding: "GRPC", tenant: "", protocolVersion: "1.0" },
        ],
      },
    };
    const http = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(cards[req.url ?? ""]));
    });
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    try {
      await expect(service({ tools: { old: { kind: "a2a", url: `${base}/v03.json` } } })).rejects.toThrow(
        /^tools\.old: the A2A agent card at .*\/v03\.json is not an A2A 1\.0 agent card .*point the url at an agent that speaks A2A 1\.0$/,
      );
      await expect(service({ tools: { grpc: { kind: "a2a", url: `${base}/grpc.json` } } })).rejects.toThrow(
        /^tools\.grpc: the A2A agent card at .*\/grpc\.json offers no interface Arbor can use \(it offers GRPC 1\.0; Arbor speaks JSONRPC and HTTP\+JSON\)/,
      );
    } finally {
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    }
  });

  it("names the bad field", () => {
    const problems = (entry: Record<string, unknown>) => {
      try {
        parseToolsConfig({ tools: { d: { kind: "a2a", ...entry } } });
        return "";
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        return (e as ValidationError).issues.join("; ");
      }
    };
    expect(problems({ url: "https://agent.example.com" })).toBe("");
    expect(problems({})).toMatch(/^tools\.d\.url: /);
    expect(problems({ url: "ftp://agent.example.com" })).toMatch(/^tools\.d\.url: /);
    expect(problems({ url: "https://a.example.com", headers: { authorization: 1 } })).toMatch(
      /^tools\.d\.headers\.authorization: /,
    );
    expect(problems({ url: "https://a.example.com", timeoutMs: 5 })).toMatch(/^tools\.d\.timeoutMs: /);
    expect(problems({ url: "https://a.example.com", parameters: { type: "object" } })).toMatch(
      /^tools\.d: .*"parameters"/,
    );
  });
});

describe("delegating in a local run", () => {
  const ORGANISER: AssistantDefinition[] = [
    { name: "Organiser", id: "organiser", purpose: "Find venues for team events", tools: ["venue_desk"] },
  ];
  const seen: LlmRequest[] = [];
  const script: ScriptFunction = (r) => {
    if (isPlan(r)) return planOf({ name: "Find a venue", purpose: "Find a venue in Lisbon for 12 people" });
    if (isEvaluation(r)) return pass("done");
    seen.push(r);
    const answer = [...r.messages].reverse().find((m) => m.role === "tool");
    if (!answer)
      return {
        toolCalls: [{ name: "venue_desk", arguments: { message: "A venue in Lisbon for 12 people" } }],
      };
    return { content: `The venue desk says: ${answer.content?.split("\n")[0]}` };
  };

  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it("an assistant delegates to the remote agent and its answer is the task's output", async () => {
    h = await Harness.create({
      script,
      assistants: ORGANISER,
      outbound: LOOPBACK_ALLOWED,
      toolsConfig: desk(),
    });
    const { rootTaskId } = await h.submit("Find a venue in Lisbon for 12 people");
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe(
      'The venue desk says: Answer to "A venue in Lisbon for 12 people": Casa do Rio, seats 40.',
    );
    // The model saw the agent's card as the tool's description.
    expect(seen[0]?.tools?.find((t) => t.name === "venue_desk")?.description).toMatch(
      /remote agent "Venue desk"/,
    );
    expect(peer.messages.map((m) => m.parts)).toEqual([["A venue in Lisbon for 12 people"]]);
    const records = await h.rt.audit.forTask(rootTaskId);
    expect(records.map((r) => `${r.tool}:${r.stage}`)).toEqual([
      "venue_desk:requested",
      "venue_desk:completed",
    ]);
  });
});
