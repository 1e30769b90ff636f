import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import * as z from "zod";

/**
 * A small MCP server for the tests, written with the SDK: venue lookups. Run over stdio as its own
 * process (`node test/peers/mcp-venues.ts`) or served over streamable HTTP in-process.
 */
export function venuesServer(): McpServer {
  const server = new McpServer({ name: "venues", version: "1.0.0" });
  server.registerTool(
    "lookup_venue",
    {
      description: "Finds a venue for a team in a city, with its capacity.",
      inputSchema: { city: z.string().min(1), people: z.number().int().min(1).max(500) },
    },
    async ({ city, people }) => ({
      content: [{ type: "text", text: `Venue in ${city}: Casa do Rio, seats ${Math.max(people, 40)}.` }],
    }),
  );
  server.registerTool(
    "book_venue",
    { description: "Books a venue (fails for closed venues).", inputSchema: { venue: z.string() } },
    async ({ venue }) => ({
      content: [{ type: "text", text: `${venue} is closed that week` }],
      isError: true,
    }),
  );
  server.registerTool(
    "hold_venue",
    {
      description: "Holds a venue for a day; says which idempotency key and attempt the call carried.",
      inputSchema: { venue: z.string() },
    },
    async ({ venue }, extra) => ({
      content: [
        {
          type: "text",
          text: `${venue} held (key ${String(extra._meta?.["arbor/idempotency-key"])}, attempt ${String(extra._meta?.["arbor/attempt"])})`,
        },
      ],
    }),
  );
  return server;
}

if (process.argv[1]?.endsWith("mcp-venues.ts")) {
  const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
  await venuesServer().connect(new StdioServerTransport());
}
