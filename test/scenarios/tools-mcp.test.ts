import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Server as LowLevelServer } from "@modelcontextprotocol/sdk/server/index.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import { MAX_TOOL_PAGES } from "../../shared/tools/bindings/mcp.ts";
import { idempotencyKeyOf } from "../../shared/tools/service/call-record.ts";
import { statelessMcp } from "../peers/mcp-http.ts";
import { venuesServer } from "../peers/mcp-venues.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import { LOOPBACK_ALLOWED } from "./tool-world.ts";

/**
 * MCP end to end: an MCP server written with the SDK (test/peers/mcp-venues.ts), its tools
 * registered by configuration, and called by an assistant in a local run, over stdio (Arbor starts
 * the server) and over streamable HTTP.
 */
const SCOUT: AssistantDefinition[] = [
  {
    name: "Scout",
    id: "scout",
    purpose: "Find venues for team events",
    tools: ["lookup_venue", "book_venue"],
  },
];

const lastToolResult = (r: LlmRequest) => [...r.messages].reverse().find((m) => m.role === "tool");

/** The leaf asks for a venue, then for a booking (which the server refuses), then answers. */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Find a venue", purpose: "Find a venue in Lisbon for 12 people" });
  if (isEvaluation(r)) return pass("done");
  const last = lastToolResult(r);
  if (!last) return { toolCalls: [{ name: "lookup_venue", arguments: { city: "Lisbon", people: 12 } }] };
  if (last.content?.startsWith("Venue in"))
    return { toolCalls: [{ name: "book_venue", arguments: { venue: "Casa do Rio" } }] };
  return {
    content: `Found: ${r.messages
      .filter((m) => m.role === "tool")
      .map((m) => m.content)
      .join(" / ")}`,
  };
};

let http: Server;
let url: string;
beforeAll(async () => {
  http = statelessMcp(venuesServer);
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  http.closeAllConnections();
  await new Promise((r) => http.close(r));
});

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const stdio = {
  kind: "mcp",
  transport: "stdio",
  command: process.execPath,
  args: [join(import.meta.dirname, "../peers/mcp-venues.ts")],
};

describe.each([
  ["stdio", () => stdio],
  ["streamable HTTP", () => ({ kind: "mcp", transport: "http", url })],
])("MCP tools over %s", (_, server) => {
  it("an assistant calls the server's tools in a local run; the server's error comes back to the model", async () => {
    h = await Harness.create({
      script,
      assistants: SCOUT,
      outbound: LOOPBACK_ALLOWED,
      toolsConfig: { tools: { lookup_venue: server(), book_venue: { ...server(), risky: false } } },
    });
    // The model sees the server's own description and schema.
    const [lookup] = h.engine.deps.tools.describe(["lookup_venue"]);
    expect(lookup).toMatchObject({
      kind: "mcp",
      description: "Finds a venue for a team in a city, with its capacity.",
      parameters: { type: "object", required: ["city", "people"] },
    });

    const { rootTaskId } = await h.submit("Find a venue in Lisbon for 12 people");
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe(
      "Found: Venue in Lisbon: Casa do Rio, seats 40. / book_venue failed: Casa do Rio is closed that week",
    );
    const audit = await h.rt.audit.forTask(rootTaskId);
    expect(audit.map((r) => `${r.tool}:${r.stage}${r.reason ? `:${r.reason}` : ""}`)).toEqual([
      "lookup_venue:requested",
      "lookup_venue:completed",
      "book_venue:requested",
      "book_venue:failed:error",
    ]);
  });

  it("checks arguments against the server's schema before the call goes out", async () => {
    h = await Harness.create({
      script,
      assistants: SCOUT,
      outbound: LOOPBACK_ALLOWED,
      toolsConfig: { tools: { lookup_venue: server() } },
    });
    const result = await h.engine.deps.tools.execute(
      "lookup_venue",
      { city: "", people: 0 },
      {
        taskId: "cld:common.Tenant.acme/plan.Task.t",
        actor: "cld:common.Tenant.acme/common.Assistant.scout",
        callId: "c1",
      },
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /Invalid arguments for lookup_venue: city: must NOT have fewer than 1 characters; people: must be >= 1/,
    );
  });

  it("passes the call's idempotency key and attempt in the request's _meta", async () => {
    h = await Harness.create({
      script,
      assistants: SCOUT,
      outbound: LOOPBACK_ALLOWED,
      toolsConfig: { tools: { hold_venue: server() } },
    });
    const context = {
      taskId: "cld:common.Tenant.acme/plan.Task.t",
      actor: "cld:common.Tenant.acme/common.Assistant.scout",
      callId: "c1",
      allowedTools: ["hold_venue"],
    };
    const key = idempotencyKeyOf(context.taskId, context.callId);
    const first = await h.engine.deps.tools.execute("hold_venue", { venue: "Casa do Rio" }, context);
    expect(first).toEqual({ content: `Casa do Rio held (key ${key}, attempt 1)` });
    // The same call run again (as after a crash): the same key, the next attempt.
    const again = await h.engine.deps.tools.execute("hold_venue", { venue: "Casa do Rio" }, context);
    expect(again).toEqual({ content: `Casa do Rio held (key ${key}, attempt 2)` });
  });
});

describe("MCP configuration", () => {
  it("says which tool the server does not have, and which it offers", async () => {
    await expect(
      Harness.create({
        script,
        assistants: SCOUT,
        toolsConfig: { tools: { find: { ...stdio, tool: "find_hotel" } } },
      }),
    ).rejects.toThrow(
      /tools\.find: the MCP server .* has no tool "find_hotel"; it offers lookup_venue, book_venue/,
    );
  });

  it("says when the server cannot be reached", async () => {
    await expect(
      Harness.create({
        script,
        assistants: SCOUT,
        toolsConfig: {
          tools: { lookup_venue: { kind: "mcp", transport: "http", url: "http://127.0.0.1:9/mcp" } },
        },
      }),
    ).rejects.toThrow(/Cannot reach the MCP server http:\/\/127\.0\.0\.1:9\/mcp .*check the command or URL/);
  });
});

describe("an MCP server that lists its tools for ever", () => {
  it("is followed for at most MAX_TOOL_PAGES pages, then refused with a ConfigError saying so", async () => {
    let pages = 0;
    const endless = statelessMcp(() => {
      const server = new LowLevelServer(
        { name: "endless", version: "1.0.0" },
        { capabilities: { tools: {} } },
      );
      server.setRequestHandler(ListToolsRequestSchema, async () => {
        pages++;
        return {
          tools: [{ name: `tool_${pages}`, inputSchema: { type: "object" as const } }],
          nextCursor: `page-${pages}`, // always one more
        };
      });
      return server;
    });
    await new Promise<void>((r) => endless.listen(0, "127.0.0.1", r));
    try {
      const at = `http://127.0.0.1:${(endless.address() as AddressInfo).port}/mcp`;
      const error = await Harness.create({
        script,
        assistants: SCOUT,
        outbound: LOOPBACK_ALLOWED,
        toolsConfig: { tools: { lookup_venue: { kind: "mcp", transport: "http", url: at } } },
      }).then(
        async (made) => {
          h = made;
          return made.engine.deps.tools.execute(
            "lookup_venue",
            {},
            {
              taskId: "cld:common.Tenant.acme/plan.Task.t",
              actor: "cld:common.Tenant.acme/common.Assistant.scout",
              callId: "c1",
            },
          );
        },
        (e: unknown) => e,
      );
      expect(JSON.stringify(error instanceof Error ? error.message : error)).toMatch(
        new RegExp(`more than ${MAX_TOOL_PAGES} pages`),
      );
      expect(pages).toBe(MAX_TOOL_PAGES);
    } finally {
      endless.closeAllConnections();
      await new Promise((r) => endless.close(r));
    }
  });
});
