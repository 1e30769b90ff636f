import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ConfigError, TooLargeError, ToolError } from "../../kernel/errors.ts";
import type { ToolBinding, ToolContext } from "../../ports/tools.ts";
import { outsideTool } from "../service/json-schema.ts";

/**
 * Tools served by MCP servers (`@modelcontextprotocol/sdk` client), over stdio (Arbor starts the
 * server as a child process) or streamable HTTP. Each server is connected once, when the tool
 * service opens; its tools' descriptions and input schemas come from the server's own tools/list,
 * so the model sees what the server says, and arguments are checked against the server's schema
 * before the call goes out.
 */
export type McpServer =
  | { transport: "stdio"; command: string; args: string[]; env?: Record<string, string>; cwd?: string }
  | { transport: "http"; url: string; headers: Record<string, string> };

interface ServerTool {
  name: string;
  description?: string | undefined;
  inputSchema: Record<string, unknown>;
}

/** The `_meta` keys of tools/call that carry the call's idempotency key and attempt number. */
export const MCP_IDEMPOTENCY_KEY = "arbor/idempotency-key";
export const MCP_ATTEMPT = "arbor/attempt";

/** The connections to the MCP servers a configuration names, one per distinct server. */
export class McpConnections {
  readonly #clients = new Map<string, Promise<{ client: Client; tools: Map<string, ServerTool> }>>();
  readonly #fetch: typeof fetch;

  constructor(fetchFn: typeof fetch) {
    this.#fetch = fetchFn;
  }

  /** A binding for the tool `serverTool` of `server`, named `name` for the model. */
  async binding(
    name: string,
    server: McpServer,
    serverTool: string,
    options: { description?: string; risky: boolean },
  ): Promise<ToolBinding> {
    const { client, tools } = await this.#connect(server);
    const tool = tools.get(serverTool);
    if (!tool) {
      throw new ConfigError(
        `tools.${name}: the MCP server ${describe(server)} has no tool "${serverTool}"; it offers ${[...tools.keys()].join(", ") || "none"}`,
      );
    }
    const parameters = { type: "object", ...tool.inputSchema };
    return outsideTool(
      {
        name,
        kind: "mcp",
        description: options.description ?? tool.description ?? serverTool,
        parameters,
        risky: options.risky,
      },
      async (args: Record<string, unknown>, context: ToolContext) => {
        // The call's idempotency key and attempt go in the request's _meta, for a server that deduplicates.
        const meta = context.idempotencyKey
          ? { _meta: { [MCP_IDEMPOTENCY_KEY]: context.idempotencyKey, [MCP_ATTEMPT]: context.attempt ?? 1 } }
          : {};
        const result = await client.callTool(
          { name: serverTool, arguments: args, ...meta },
          undefined,
          context.signal ? { signal: context.signal } : {},
        );
        const text = contentText(result.content);
        if (result.isError) throw new ToolError(text || "the MCP tool reported an error and said no more");
        return text;
      },
    );
  }

  /** Closes every connection (and stops the servers Arbor started). */
  async close(): Promise<void> {
    const all = [...this.#clients.values()];
    this.#clients.clear();
    await Promise.allSettled(all.map(async (c) => (await c).client.close()));
  }

  #connect(server: McpServer) {
    const key = JSON.stringify(server);
    let connection = this.#clients.get(key);
    if (!connection) {
      connection = (async () => {
        const client = new Client({ name: "arbor", version: "1.0.0" });
        const transport =
          server.transport === "stdio"
            ? new StdioClientTransport({
                command: server.command,
                args: server.args,
                ...(server.env ? { env: server.env } : {}),
                ...(server.cwd ? { cwd: server.cwd } : {}),
                stderr: "pipe",
              })
            : new StreamableHTTPClientTransport(new URL(server.url), {
                requestInit: { headers: server.headers },
                fetch: this.#fetch,
              });
        try {
          await client.connect(transport);
          const tools = new Map<string, ServerTool>();
          let cursor: string | undefined;
          let pages = 0;
          do {
            // A server that keeps answering with a next page (the same cursor, or one more for ever)
            // is followed so far and no further.
            if (++pages > MAX_TOOL_PAGES)
              throw new TooLargeError(
                `it lists its tools over more than ${MAX_TOOL_PAGES} pages: Arbor reads at most ${MAX_TOOL_PAGES}`,
              );
            const page = await client.listTools(cursor ? { cursor } : {});
            for (const t of page.tools) {
              tools.set(t.name, t as ServerTool);
              if (tools.size > MAX_TOOLS)
                throw new TooLargeError(
                  `it lists more than ${MAX_TOOLS} tools: Arbor takes at most ${MAX_TOOLS} from one server`,
                );
            }
            cursor = page.nextCursor === cursor ? undefined : page.nextCursor;
          } while (cursor);
          return { client, tools };
        } catch (cause) {
          await client.close().catch(() => undefined);
          throw new ConfigError(
            `Cannot reach the MCP server ${describe(server)} (${(cause as Error).message}): check the command or URL in the tool configuration`,
            { cause },
          );
        }
      })();
      this.#clients.set(key, connection);
    }
    return connection;
  }
}

/** The most pages of tools, and tools, read from one MCP server. */
export const MAX_TOOL_PAGES = 50;
export const MAX_TOOLS = 1_000;

const describe = (s: McpServer) =>
  s.transport === "stdio" ? `"${[s.command, ...s.args].join(" ")}"` : s.url;

/** The text of an MCP tool result; other kinds of content are named, not inlined. */
function contentText(content: unknown): string {
  if (!Array.isArray(content)) return "";
  return content
    .map(
      (c: {
        type?: string;
        text?: string;
        mimeType?: string;
        resource?: { uri?: string; text?: string };
      }) => {
        if (c.type === "text") return c.text ?? "";
        if (c.type === "resource") return c.resource?.text ?? `[resource ${c.resource?.uri ?? ""}]`;
        if (c.type === "resource_link") return `[resource link ${(c as { uri?: string }).uri ?? ""}]`;
        return `[${c.type ?? "content"}${c.mimeType ? ` ${c.mimeType}` : ""}]`;
      },
    )
    .join("\n");
}
