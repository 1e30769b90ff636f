import { readFileSync } from "node:fs";
import { z } from "zod";
import { formatIssues } from "../domain/resources.ts";
import { ConfigError, ValidationError } from "../errors.ts";
import { BUILTIN_NAMES } from "./builtins.ts";

/**
 * The tool registry as configuration: each tool name maps to what implements it. Validated with
 * zod; an error names the bad field (`tools.fetch_page.allowedHosts: ...`).
 *
 *   { "tools": {
 *       "calculate_sha256": { "kind": "builtin", "function": "sha256" },
 *       "fetch_page": { "kind": "builtin", "function": "http_request", "allowedHosts": ["example.com"] },
 *       "weather": { "kind": "http", "url": "https://api.example.com/weather", "method": "GET",
 *                    "description": "...", "parameters": { "type": "object", ... } } } }
 */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const common = {
  description: z.string().min(1).max(4000).optional(),
  /** Wait for a person's confirmation of the exact arguments before each call. */
  risky: z.boolean().optional(),
  /** Longest a call may take (default: the service's, 30 s). */
  timeoutMs: z.number().int().min(100).max(900_000).optional(),
};

const host = z
  .string()
  .regex(/^(\*\.)?([a-z0-9-]+\.)*[a-z0-9-]+$/i, "a host name, or *.example.com for its subdomains");

const BuiltinEntry = z
  .object({
    kind: z.literal("builtin"),
    function: z.enum(BUILTIN_NAMES),
    allowedHosts: z.array(host).min(1).max(100).optional(),
    ...common,
  })
  .strict()
  .superRefine((e, ctx) => {
    if (e.function === "http_request" && !e.allowedHosts)
      ctx.addIssue({
        code: "custom",
        path: ["allowedHosts"],
        message: "http_request needs the hosts it may reach",
      });
    if (e.function !== "http_request" && e.allowedHosts)
      ctx.addIssue({
        code: "custom",
        path: ["allowedHosts"],
        message: "only http_request takes allowedHosts",
      });
  });

const JsonSchemaObject = z
  .record(z.string(), z.unknown())
  .refine((s) => s.type === "object", { message: 'must be a JSON Schema with "type": "object"' });

const HttpEntry = z
  .object({
    kind: z.literal("http"),
    url: z.url({ protocol: /^https?$/ }),
    method: z.enum(["GET", "POST", "PUT", "PATCH"]).default("POST"),
    headers: z.record(z.string(), z.string()).default({}),
    parameters: JsonSchemaObject,
    ...common,
    description: z.string().min(1).max(4000),
  })
  .strict();

/** A tool of an MCP server: its description and schema come from the server. */
const McpEntry = z
  .object({
    kind: z.literal("mcp"),
    transport: z.enum(["stdio", "http"]),
    /** stdio: the server's command and arguments (Arbor starts it). */
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().min(1).optional(),
    /** http: the server's streamable HTTP endpoint, and headers to send (a token, say). */
    url: z.url({ protocol: /^https?$/ }).optional(),
    headers: z.record(z.string(), z.string()).default({}),
    /** The server's name for the tool (default: this entry's name). */
    tool: z.string().min(1).max(200).optional(),
    ...common,
  })
  .strict()
  .superRefine((e, ctx) => {
    if (e.transport === "stdio" && !e.command)
      ctx.addIssue({
        code: "custom",
        path: ["command"],
        message: "a stdio MCP server needs the command that starts it",
      });
    if (e.transport === "http" && !e.url)
      ctx.addIssue({ code: "custom", path: ["url"], message: "an http MCP server needs its URL" });
  });

export const ToolEntrySchema = z.discriminatedUnion("kind", [BuiltinEntry, HttpEntry, McpEntry]);
export type ToolEntry = z.infer<typeof ToolEntrySchema>;

export const ToolsConfigSchema = z
  .object({
    tools: z.record(z.string(), ToolEntrySchema).superRefine((tools, ctx) => {
      for (const name of Object.keys(tools))
        if (!TOOL_NAME.test(name))
          ctx.addIssue({ code: "custom", path: [name], message: "tool names are 1-64 of a-z A-Z 0-9 _ -" });
    }),
  })
  .strict();
export type ToolsConfig = z.infer<typeof ToolsConfigSchema>;

/** Parses a tool configuration; throws ValidationError naming each bad field. */
export function parseToolsConfig(raw: unknown, source = "the tool configuration"): ToolsConfig {
  const parsed = ToolsConfigSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(`${source} is not valid`, formatIssues(parsed.error));
  return parsed.data;
}

/** The tools every Arbor has unless configured otherwise: the built-ins that need no settings. */
export const DEFAULT_TOOLS: ToolsConfig = {
  tools: {
    sha256: { kind: "builtin", function: "sha256" },
    md5: { kind: "builtin", function: "md5" },
    word_count: { kind: "builtin", function: "word_count" },
    calculator: { kind: "builtin", function: "calculator" },
    send_email: { kind: "builtin", function: "send_email" },
    search_resources: { kind: "builtin", function: "search_resources" },
    read_resource: { kind: "builtin", function: "read_resource" },
  },
};

/** The registry of a JSON file (ARBOR_TOOLS_FILE), or the defaults when there is none. */
export function loadToolsConfig(file: string | undefined): ToolsConfig {
  if (file === undefined) return DEFAULT_TOOLS;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (cause) {
    throw new ConfigError(
      `ARBOR_TOOLS_FILE ${file} cannot be read as JSON (${(cause as Error).message}): fix the file or unset the variable`,
      { cause },
    );
  }
  return parseToolsConfig(raw, `ARBOR_TOOLS_FILE ${file}`);
}
