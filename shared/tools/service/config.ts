import { readFileSync } from "node:fs";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import { ConfigError, ValidationError } from "../../kernel/errors.ts";
import { BUILTIN_NAMES } from "./builtins.ts";

/**
 * The tool registry as configuration: each tool name maps to what implements it. Validated with
 * zod; an error names the bad field (`tools.fetch_page.allowedHosts: ...`).
 *
 *   { "tools": {
 *       "calculate_sha256": { "kind": "builtin", "function": "sha256", "namespace": "hashing" },
 *       "fetch_page": { "kind": "builtin", "function": "http_request", "allowedHosts": ["example.com"] },
 *       "weather": { "kind": "http", "url": "https://api.example.com/weather", "method": "GET",
 *                    "description": "...", "parameters": { "type": "object", ... } },
 *       "quote": { "kind": "lambda", "function": "arn:aws:lambda:eu-west-1:123456789012:function:quote",
 *                  "qualifier": "live", "description": "...", "parameters": { "type": "object", ... } },
 *       "venue_desk": { "kind": "a2a", "url": "https://venues.example.com",
 *                       "headers": { "authorization": "Bearer ..." } } } }
 */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * A namespace groups tools for ListTools (`GET /v1/tools?namespace=web`): 1-64 of a-z 0-9 _ -,
 * starting with a letter or a digit (lower case only, so `Web` and `web` are never two groups).
 * A tool's entry may give one (`"namespace": "web"`); without one it is the tool's kind
 * (`builtin`, `http`, `lambda`, `mcp`, `a2a`): known from the configuration alone, so a remote
 * server or agent renaming itself never moves a tool.
 */
export const NAMESPACE = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const NAMESPACE_RULE = "1-64 of a-z 0-9 _ -, starting with a letter or a digit";

/** A tool entry's namespace: its own, else its kind. */
export const namespaceOf = (entry: { kind: string; namespace?: string | undefined }): string =>
  entry.namespace ?? entry.kind;

const common = {
  /** The tool's namespace (default: its kind): what ListTools filters by. */
  namespace: z.string().regex(NAMESPACE, `a namespace is ${NAMESPACE_RULE}`).optional(),
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

/**
 * A Lambda function as Invoke takes it: its name, maybe with a version or alias after a colon, or
 * its full ARN (whose region is where it is invoked). Named groups: region (ARN only), name, qualifier.
 */
export const LAMBDA_FUNCTION =
  /^(?:arn:aws[a-z-]*:lambda:(?<region>[a-z]{2,}(?:-[a-z]+)+-\d{1,2}):\d{12}:function:)?(?<name>[a-zA-Z0-9_-]{1,64})(?::(?<qualifier>\$LATEST|[a-zA-Z0-9_-]{1,128}))?$/;
const AWS_REGION = /^[a-z]{2,}(?:-[a-z]+)+-\d{1,2}$/;

/** A tool bound to an AWS Lambda function, invoked synchronously with the arguments as its event. */
const LambdaEntry = z
  .object({
    kind: z.literal("lambda"),
    function: z
      .string()
      .regex(
        LAMBDA_FUNCTION,
        "a Lambda function name (my-function), with a version or alias (my-function:live), " +
          "or its ARN (arn:aws:lambda:us-east-1:123456789012:function:my-function)",
      ),
    /** A version or alias (default: what `function` names, else $LATEST). */
    qualifier: z
      .string()
      .regex(/^(?:\$LATEST|[a-zA-Z0-9_-]{1,128})$/, "$LATEST, a version number or an alias name")
      .optional(),
    /** Where the function is (default: the ARN's region, else the SDK's: AWS_REGION, the profile). */
    region: z.string().regex(AWS_REGION, "an AWS region such as us-east-1").optional(),
    parameters: JsonSchemaObject,
    ...common,
    description: z.string().min(1).max(4000),
  })
  .strict()
  .superRefine((e, ctx) => {
    const named = LAMBDA_FUNCTION.exec(e.function)?.groups;
    if (e.qualifier && named?.qualifier)
      ctx.addIssue({
        code: "custom",
        path: ["qualifier"],
        message: `the function already names its version or alias (${named.qualifier}): give it once`,
      });
    if (e.region && named?.region && e.region !== named.region)
      ctx.addIssue({
        code: "custom",
        path: ["region"],
        message: `the function's ARN is in ${named.region}: a function is invoked in its own region (leave region out)`,
      });
  });

/**
 * A remote agent spoken to over A2A 1.0: the model's message goes to it, its answer comes back.
 * Its description comes from its agent card (fetched when Arbor starts) unless one is given here.
 */
const A2aEntry = z
  .object({
    kind: z.literal("a2a"),
    /** The agent's base URL (its card is at <url>/.well-known/agent-card.json) or its card's URL (*.json). */
    url: z.url({ protocol: /^https?$/ }),
    /** Sent with every request, the card's included (a bearer token, say); never shown to the model. */
    headers: z.record(z.string(), z.string()).default({}),
    ...common,
  })
  .strict();

export const ToolEntrySchema = z.discriminatedUnion("kind", [
  BuiltinEntry,
  HttpEntry,
  McpEntry,
  LambdaEntry,
  A2aEntry,
]);
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
    graph_add: { kind: "builtin", function: "graph_add" },
    graph_query: { kind: "builtin", function: "graph_query" },
    graph_remove: { kind: "builtin", function: "graph_remove" },
    ask_person: { kind: "builtin", function: "ask_person" },
    create_artifact: { kind: "builtin", function: "create_artifact" },
    remember: { kind: "builtin", function: "remember" },
    forget: { kind: "builtin", function: "forget" },
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
