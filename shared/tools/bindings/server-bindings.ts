import type { ToolEntry } from "../service/config.ts";
import type { a2aAgentBinding } from "./a2a-agent.ts";
import type { McpConnections, McpServer } from "./mcp.ts";

/** How the tool service binds the tools that are other servers (MCP, A2A): from their configuration. */
export function mcpBinding(name: string, entry: Extract<ToolEntry, { kind: "mcp" }>, mcp: McpConnections) {
  const server: McpServer =
    entry.transport === "stdio"
      ? {
          transport: "stdio",
          command: entry.command as string,
          args: entry.args,
          ...(entry.env ? { env: entry.env } : {}),
          ...(entry.cwd ? { cwd: entry.cwd } : {}),
        }
      : { transport: "http", url: entry.url as string, headers: entry.headers };
  return mcp.binding(name, server, entry.tool ?? name, {
    ...(entry.description ? { description: entry.description } : {}),
    risky: entry.risky ?? false,
  });
}

/** What binding a remote agent takes from the tool service's options (ToolServiceOptions). */
export interface RemoteAgentOptions {
  defaultTimeoutMs?: number;
  publicUrl?: string | (() => string | undefined);
  fetch: typeof fetch;
}

/** A remote A2A agent: its card is fetched now (a card that cannot be is a ConfigError naming the tool). */
export function a2aBinding(
  name: string,
  entry: Extract<ToolEntry, { kind: "a2a" }>,
  options: RemoteAgentOptions,
  bind: typeof a2aAgentBinding,
) {
  return bind(
    name,
    {
      ...(entry.description ? { description: entry.description } : {}),
      risky: entry.risky ?? false,
      settings: { url: entry.url, headers: entry.headers },
      openTimeoutMs: entry.timeoutMs ?? options.defaultTimeoutMs ?? 30_000,
      callbackBase: () => (typeof options.publicUrl === "function" ? options.publicUrl() : options.publicUrl),
    },
    options.fetch,
  );
}
