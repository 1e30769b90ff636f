import { createServer, type IncomingMessage, type Server } from "node:http";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";

/**
 * An HTTP server that answers each request with a new MCP server from `make`, stateless, as the
 * SDK's streamable HTTP examples do. `seen` is told of every request first (its headers, say).
 */
export function statelessMcp(
  make: () => { connect: McpServer["connect"]; close(): Promise<void> },
  seen?: (req: IncomingMessage) => void,
): Server {
  return createServer(async (req, res) => {
    seen?.(req);
    const server = make();
    const transport = new StreamableHTTPServerTransport({}); // no session id generator: stateless
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    let body = "";
    for await (const chunk of req) body += chunk;
    await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
  });
}
