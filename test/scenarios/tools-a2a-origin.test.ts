import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { AgentInterface } from "@a2a-js/sdk";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { ConfigError } from "../../shared/kernel/errors.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { type A2aAgentPeer, startA2aAgent } from "../peers/a2a-agent.ts";
import { openToolWorld, type ToolWorld } from "./tool-world.ts";

/**
 * The a2a tool's credentials go only to the origin the operator configured. The remote agent
 * (test/peers/a2a-agent.ts, the SDK's server side) serves a card whose interface points at another
 * server; that server records every request it gets, and must get none.
 */
const TOKEN = "s3cret-token";
const TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
const ASSISTANT = `${tenantUrn("acme")}/common.Assistant.a1`;

let peer: A2aAgentPeer;
let elsewhere: Server;
let elsewhereUrl: string;
const reached: { url: string; headers: IncomingHttpHeaders }[] = [];
let home: AgentInterface[];

beforeAll(async () => {
  peer = await startA2aAgent({ token: TOKEN });
  home = structuredClone(peer.card.supportedInterfaces);
  elsewhere = createServer((req, res) => {
    reached.push({ url: req.url ?? "", headers: { ...req.headers } });
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((r) => elsewhere.listen(0, "127.0.0.1", r));
  elsewhereUrl = `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await peer.close();
  elsewhere.closeAllConnections();
  await new Promise((r) => elsewhere.close(r));
});

let world: ToolWorld;
beforeEach(async () => {
  world = await openToolWorld("arbor-a2a-origin-");
  reached.length = 0;
});
afterEach(async () => {
  peer.card.supportedInterfaces = structuredClone(home);
  await world.close();
});

const config = () => ({
  tools: {
    venue_desk: {
      kind: "a2a",
      url: peer.url,
      headers: { authorization: `Bearer ${TOKEN}`, "x-api-key": "k-123" },
    },
  },
});

describe("A2A tool credentials", () => {
  it("refuses at start a card whose interface points at another origin, and never calls it", async () => {
    peer.card.supportedInterfaces = home.map((i) => ({ ...i, url: `${elsewhereUrl}/a2a/jsonrpc` }));
    const opening = ToolService.open(config(), world.options({ defaultTimeoutMs: 5_000 }));
    await expect(opening).rejects.toBeInstanceOf(ConfigError);
    await expect(opening).rejects.toThrow(
      `tools.venue_desk: the A2A agent card at ${peer.cardUrl} names ${elsewhereUrl}/a2a/jsonrpc for its ` +
        `interface, not the configured origin ${peer.url}: Arbor sends this tool's headers and messages only to ` +
        `${peer.url}, so it does not call the agent.`,
    );
    expect(reached).toEqual([]);
  });

  it("uses only the card's interfaces on the configured origin: the model's message and the token stay there", async () => {
    // The other origin is listed last: the SDK's client would pick it (of two 1.0 interfaces of one
    // binding, the last wins) if it were offered.
    peer.card.supportedInterfaces = [
      ...structuredClone(home),
      ...home.map((i) => ({ ...i, url: `${elsewhereUrl}/a2a/jsonrpc` })),
    ];
    const tools = await ToolService.open(config(), world.options({ defaultTimeoutMs: 5_000 }));
    try {
      const result = await tools.execute(
        "venue_desk",
        { message: "Find a venue in Lisbon" },
        { taskId: TASK, actor: ASSISTANT, callId: "call_1" },
      );
      expect(result.isError).toBeUndefined();
      expect(result.content).toMatch(/^Answer to "Find a venue in Lisbon"/);
      expect(peer.requests.at(-1)?.headers).toMatchObject({
        authorization: `Bearer ${TOKEN}`,
        "x-api-key": "k-123",
      });
      expect(reached).toEqual([]);
    } finally {
      await tools.close();
    }
  });
});
