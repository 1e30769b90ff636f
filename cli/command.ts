import type { ParseArgsOptionsConfig, parseArgs } from "node:util";
import { ValidationError } from "../shared/kernel/errors.ts";
import type { Remote } from "./lib/remote.ts";

/**
 * What a command of the `arbor` CLI is: its help (usage, what it does, options, examples) and how
 * it runs, here and against a remote Arbor, side by side. Every command is one file of
 * `cli/commands/`, listed in the table of `cli/commands/index.ts`.
 *
 * A command file is loaded for `arbor help` too, so it imports its work lazily (`await import`
 * inside `local` and `remote`): `arbor help` reads the table and nothing else. The layering test
 * keeps it so (cli-commands-load-lazily).
 */
export interface CommandHelp {
  name: string;
  /** Each way to call it, after `arbor ` (the first names the command, as every one does). */
  usage: readonly string[];
  /** One line for the command list of `arbor help`. */
  summary: string;
  /** The same, or more, for the command's own help. */
  description?: string;
  options?: readonly (readonly [flag: string, text: string])[];
  examples: readonly string[];
  notes?: readonly string[];
}

/** The options every command may be given (parsed once, in main.ts); each reads its own. */
export const OPTIONS = {
  all: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
  example: { type: "string" },
  lazy: { type: "boolean", default: false },
  yes: { type: "boolean", short: "y", default: false },
  port: { type: "string" },
  host: { type: "string" },
  "public-url": { type: "string" },
  id: { type: "string" },
  kind: { type: "string" },
  tenant: { type: "string" },
  role: { type: "string", multiple: true },
  bucket: { type: "string" },
  prefix: { type: "string" },
  queue: { type: "string" },
  bus: { type: "string" },
  "dry-run": { type: "boolean", default: false },
  max: { type: "string" },
  dead: { type: "boolean", default: false },
  status: { type: "string" },
  namespace: { type: "string" },
  repeat: { type: "string" },
  concurrency: { type: "string" },
  "fail-under": { type: "string" },
  "fail-on-regression": { type: "boolean", default: false },
  team: { type: "string" },
  label: { type: "string" },
  scorer: { type: "string", multiple: true },
  record: { type: "string" },
  replay: { type: "string" },
  model: { type: "string" },
  "judge-model": { type: "string" },
  timeout: { type: "string" },
  name: { type: "string" },
  from: { type: "string" },
} as const satisfies ParseArgsOptionsConfig;

/** The parsed options, typed from OPTIONS. */
export type Options = ReturnType<
  typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>
>["values"];

export type Write = (line: string) => void;

/** One call of a command: the words after its name, the options, where its lines go. */
export interface Call {
  args: readonly string[];
  options: Options;
  write: Write;
}

/** What a run returns: a number is the exit code (anything else: 0). */
export type Outcome = Promise<unknown>;

export interface Command extends CommandHelp {
  /**
   * Runs in this process: on the local data folder (one at a time, beside a running serve for
   * reads), or for the operator commands (policy, dlq) on the AWS account the environment names.
   * Missing: the command needs a remote Arbor.
   */
  local?(call: Call): Outcome;
  /**
   * Runs with ARBOR_URL and ARBOR_KEY set: on that Arbor (a deployed stack's API, or another
   * machine's `arbor serve`) through its HTTP API. Missing: the command runs here even then.
   */
  remote?(call: Call, remote: Remote): Outcome;
}

/**
 * A call the command cannot make sense of. The CLI prints the problem (if any) and the command's
 * usage lines under it; the commands' own modules need not know their usage text.
 */
export class UsageError extends ValidationError {
  constructor(problem = "") {
    super(problem);
  }
}

/** A command's usage lines, as its errors print them: `Usage: arbor ...`, one way per line. */
export function usageOf(command: CommandHelp): string {
  return command.usage.map((u, i) => `${i === 0 ? "Usage:" : "      "} arbor ${u}`).join("\n");
}

/** Commands that speak to a remote Arbor (ARBOR_URL, ARBOR_KEY) say so in their help with this. */
export const REMOTE_NOTE =
  "With ARBOR_URL and ARBOR_KEY set, it speaks to that Arbor (a deployed stack's API, or another machine's arbor serve) through its HTTP API instead of the local data folder.";

/** The --tenant option of the commands that run locally or remotely. */
export const TENANT_LOCAL_OR_REMOTE: readonly [string, string] = [
  "--tenant <tenant>",
  "the tenant (local data folder; default ARBOR_TENANT; remote: the key's, no other)",
];

const column = (rows: readonly (readonly [string, string])[]) => {
  const width = Math.min(28, Math.max(...rows.map(([left]) => left.length)) + 2);
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`.trimEnd()).join("\n");
};

const SETTINGS = `Settings (environment)
  ARBOR_DATA_DIR       where local mode keeps its data (default .arbor; 0700, one process at a time)
  ARBOR_TENANT         the tenant your URNs live under (default local)
  ARBOR_DURABLE        fsync commits before answers and effects (default true)
  ARBOR_API_KEYS_FILE  the API keys serve accepts (default <ARBOR_DATA_DIR>/api-keys.json)
  ARBOR_PUBLIC_URL     where callers reach serve, e.g. https://arbor.example.com (the agent card names it)
  ARBOR_WATCHDOG_STALE_MS  serve drives again work that has not moved this long (default 600000)
  ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP  webhooks to a receiver on this machine (http, any port): development only
  ARBOR_A2A_BLOCKING_WAIT_MS  how long a blocking A2A send waits before it answers "working" (default 240000)
  ARBOR_MODEL_PROVIDER bedrock or openai; with ARBOR_MODEL, and AWS_REGION or ARBOR_OPENAI_BASE_URL
  ARBOR_TEAM_FILE      the team a tenant without one gets at its first request (default: the built-in team)
  ARBOR_TOOLS_FILE     the tool registry (JSON); without it, the built-in tools
  ARBOR_URL, ARBOR_KEY a remote Arbor and an API key of it (see above)
  POWERTOOLS_LOG_LEVEL structured log level (default WARN for the CLI)
  policy, dlq: AWS credentials and AWS_REGION from the SDK's default chain; ARBOR_S3_ENDPOINT,
  ARBOR_SQS_ENDPOINT, ARBOR_LAMBDA_ENDPOINT, ARBOR_EVENTBRIDGE_ENDPOINT point the clients elsewhere
`;

/** `arbor help`: every command, one line each, the remote commands, the settings. */
export function globalHelp(commands: readonly Command[]): string {
  const list = column(commands.map((c) => [c.name, c.summary]));
  const remote = commands.filter((c) => c.remote).map((c) => c.name);
  return `arbor: run teams of LLM agents on AWS serverless, or locally in one process

Usage: arbor <command> [options]
       arbor <command> --help   its usage, options and an example (also: arbor help <command>)

Commands
${list}

${wrap(
  `With ARBOR_URL and ARBOR_KEY set, ${remote.join(", ")} speak to that Arbor (a deployed stack's API, or another machine's arbor serve) through its HTTP API instead of the local data folder: the same tree, questions answered here; team and notify need an admin's key.`,
  "  ",
)}

${SETTINGS}`;
}

/** `arbor <command> --help`: its usage, what it does, its options, an example. */
export function helpFor(command: CommandHelp): string {
  const parts = [usageOf(command), "", wrap(command.description ?? `${capital(command.summary)}.`)];
  if (command.options?.length) parts.push("", "Options", column(command.options));
  parts.push(
    "",
    command.examples.length > 1 ? "Examples" : "Example",
    ...command.examples.map((e) => `  ${e}`),
  );
  if (command.notes?.length) parts.push("", ...command.notes.map((n) => wrap(n)));
  return `${parts.join("\n")}\n`;
}

/** Text broken into lines of at most WIDTH columns, at spaces, each line indented. */
const WIDTH = 100;
function wrap(text: string, indent = ""): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && indent.length + line.length + 1 + word.length > WIDTH) {
      lines.push(`${indent}${line}`);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(`${indent}${line}`);
  return lines.join("\n");
}

const capital = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
