/**
 * The CLI's help: one entry per command (its usage lines, what it does, its options, an example),
 * from which `arbor help` (every command, one line each, and the settings) and `arbor <command>
 * --help` / `arbor help <command>` (that command alone) are printed. The commands' own "Usage:"
 * errors come from here too. Plain strings: it loads nothing else.
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

const TENANT_LOCAL_OR_REMOTE: readonly [string, string] = [
  "--tenant <tenant>",
  "the tenant (local data folder; default ARBOR_TENANT; remote: the key's)",
];

/** Which commands speak to a remote Arbor (ARBOR_URL, ARBOR_KEY) instead of the local data folder. */
const REMOTE_NOTE =
  "With ARBOR_URL and ARBOR_KEY set, it speaks to that Arbor (a deployed stack's API, or another machine's arbor serve) through its HTTP API instead of the local data folder.";

export const COMMANDS: readonly CommandHelp[] = [
  {
    name: "run",
    usage: ['run "<message>" [--lazy] [--yes]', "run --example offsite [--lazy] [--yes]"],
    summary: "run a request on the local runtime: the task tree live, approvals asked here",
    description:
      "Runs one request: the task tree is drawn as it changes, the questions of the run (a plan to approve, a risky call to allow, a task to assign) are asked here, and the answer is printed at the end. Answer a question with its number, its id, or y / n where it is a yes or a no; e opens a plan to approve in $VISUAL or $EDITOR.",
    options: [
      ["--example offsite", "the offline scripted example (no model needed)"],
      ["--lazy", "stop for approval of the whole plan before anything runs"],
      ["--yes, -y", "approve every question with its default answer"],
    ],
    examples: ["arbor run --example offsite", 'arbor run --lazy "Plan a two-day team offsite in Lisbon"'],
    notes: [
      "A model is needed without --example: ARBOR_MODEL_PROVIDER and ARBOR_MODEL (README: With a real model).",
      REMOTE_NOTE,
    ],
  },
  {
    name: "serve",
    usage: ["serve [--port <port>] [--host <address>] [--public-url <url>] [--example offsite]"],
    summary: "the HTTP API on the local runtime, for callers with an API key (Ctrl-C stops it)",
    description:
      "Serves the HTTP API, A2A and the chat channels on the local runtime, for callers with an API key (arbor keys add). Ctrl-C stops it.",
    options: [
      ["--port <port>", "the port (default 8787; 0: any free one)"],
      ["--host <address>", "the address to listen on (default 127.0.0.1)"],
      [
        "--public-url <url>",
        "where callers reach it, for the A2A agent card (default ARBOR_PUBLIC_URL, else where it listens)",
      ],
      ["--example offsite", "answer with the offline scripted model (no model needed)"],
    ],
    examples: ["arbor keys add --id user_ada --role admin && arbor serve --example offsite"],
  },
  {
    name: "keys",
    usage: [
      "keys add --id user_<name>|agent_<name> [--kind human|agent] [--tenant <tenant>] [--role <role>]...",
      "keys list [--tenant <tenant>]",
      "keys revoke <id>|<fingerprint> [--tenant <tenant>]",
    ],
    summary: "API keys: add one (printed once), list them, revoke a principal's or one key",
    description:
      "add makes a new API key and prints it once (user_<name> for a person, agent_<name> for a remote agent); list shows fingerprint, id, kind, tenant and roles (never a key); revoke removes a principal's keys, or one key.",
    options: [
      ["--id <id>", "the principal: user_<name> or agent_<name>"],
      ["--kind human|agent", "default: from the id"],
      ["--tenant <tenant>", "the tenant it acts for (default ARBOR_TENANT; remotely, your admin key's)"],
      ["--role <role>", "a role for the policy (admin: may manage keys and the team); repeat for more"],
    ],
    examples: ["arbor keys add --id user_ada --role admin", "arbor keys revoke user_ada"],
    notes: [
      "Where the keys are: by default the local keys file of serve (a running serve takes a change within a second); with ARBOR_URL + ARBOR_KEY, a remote Arbor, with an admin key of your tenant; with ARBOR_MODE=aws + ARBOR_TABLE_NAME + AWS_REGION, a deployed stack's state table, with your AWS credentials (how the first admin key of a fresh deploy is made).",
    ],
  },
  {
    name: "policy",
    usage: ["policy publish <bundle.tar.gz> [--bucket <PoliciesBucketName>] [--prefix <key prefix>]"],
    summary: "check an OPA bundle loads, then upload it with its sha256 to the policies bucket",
    options: [
      [
        "--bucket <name>",
        "the bucket (default ARBOR_POLICIES_BUCKET: storage stack output PoliciesBucketName)",
      ],
      ["--prefix <prefix>", "a key prefix (default ARBOR_POLICIES_PREFIX)"],
    ],
    examples: ["arbor policy publish policies/bundle.tar.gz --bucket my-stack-policies"],
    notes: [
      "AWS credentials and AWS_REGION from the SDK's default chain; ARBOR_S3_ENDPOINT points the client elsewhere.",
    ],
  },
  {
    name: "dlq",
    usage: ["dlq redrive [--queue <DeadLetterQueueUrl>] [--bus <EventBusName>] [--dry-run] [--max <n>]"],
    summary: "show each message of the dead-letter queue and send it back where it came from",
    options: [
      ["--queue <url>", "the queue (default ARBOR_DLQ_URL: storage stack output DeadLetterQueueUrl)"],
      ["--bus <name>", "the event bus, to find each route's function (default ARBOR_EVENT_BUS_NAME)"],
      ["--dry-run", "show the messages, send and delete nothing"],
      ["--max <n>", "at most n messages"],
    ],
    examples: ["arbor dlq redrive --dry-run --max 10"],
    notes: [
      "AWS credentials and AWS_REGION from the SDK's default chain; ARBOR_SQS_ENDPOINT, ARBOR_LAMBDA_ENDPOINT and ARBOR_EVENTBRIDGE_ENDPOINT point the clients elsewhere.",
    ],
  },
  {
    name: "notify",
    usage: [
      "notify ls [--dead | --status pending|sending|delivered|dead]",
      "notify redrive <delivery-id>",
      "notify redrive --all",
    ],
    summary: "webhook deliveries (callbacks, A2A push): list them, send dead ones again",
    description:
      "ls lists the webhook deliveries (HTTP callbacks, A2A push) of the local data folder, dead ones by default; redrive sends a dead delivery again (a new hour of retries), --all every dead one.",
    options: [
      ["--dead", "dead deliveries only (the default)"],
      ["--status <s>", "pending, sending, delivered or dead"],
      ["--all", "redrive: every dead delivery"],
    ],
    examples: ["arbor notify ls --status pending", "arbor notify redrive --all"],
    notes: [`${REMOTE_NOTE} It needs an admin's key there.`],
  },
  {
    name: "team",
    usage: ["team apply <file> [--yes] [--dry-run] [--tenant <tenant>]", "team show [--tenant <tenant>]"],
    summary: "make a tenant's team what a team file says (the change shown, then applied), or print it",
    description:
      "apply makes a tenant's team what a team file says: the change is shown, then applied once you say yes; show prints the tenant's team as a team file.",
    options: [
      ["--yes, -y", "apply without asking (needed when no terminal can be asked)"],
      ["--dry-run", "show the change only"],
      TENANT_LOCAL_OR_REMOTE,
    ],
    examples: ["arbor team apply team.json --dry-run", "arbor team show > team.json"],
    notes: [`${REMOTE_NOTE} It needs an admin's key there.`],
  },
  {
    name: "tools",
    usage: ["tools ls [--namespace <ns>] [--tenant <tenant>]"],
    summary: "list a tenant's tools (its stored Tool resources), by namespace",
    options: [
      ["--namespace <ns>", 'only the tools of one namespace (a tool entry\'s "namespace", else its kind)'],
      TENANT_LOCAL_OR_REMOTE,
    ],
    examples: ["ARBOR_TOOLS_FILE=examples/mcp-venues/tools.json arbor tools ls --namespace venues"],
    notes: ["Locally the tools of ARBOR_TOOLS_FILE (else the built-ins) are registered first.", REMOTE_NOTE],
  },
  {
    name: "graph",
    usage: ["graph query [subject] [predicate] [object] [--max <n>] [--tenant <tenant>]"],
    summary: "the triples of a tenant's graph (linked data) matching a pattern",
    description:
      'Prints the triples of a tenant\'s graph matching one pattern, one line each. ?x or - (or nothing) matches anything; a literal object as JSON, \'{"value":"Ada","language":"en"}\'.',
    options: [
      ["--max <n>", "at most n triples (1-100, default 100)"],
      [
        "--tenant <tenant>",
        "the tenant (local data folder; default ARBOR_TENANT; remote: the key's, an admin's)",
      ],
    ],
    examples: ["arbor graph query - schema:name"],
    notes: [REMOTE_NOTE],
  },
  {
    name: "demo",
    usage: ["demo"],
    summary: "walk through the local foundation: resources, task log, event bus, replay",
    examples: ["arbor demo && arbor ls --all"],
  },
  {
    name: "ls",
    usage: ["ls [urn] [--all]"],
    summary: "list the resources directly below a URN (default: your tenant)",
    options: [["--all", "every level below, not only the first"]],
    examples: ["arbor ls --all"],
    notes: [REMOTE_NOTE],
  },
  {
    name: "get",
    usage: ["get <urn>"],
    summary: "print one resource as JSON",
    examples: ["arbor get cld:common.Tenant.local/common.Conversation.01J0000000000000000000000"],
    notes: [REMOTE_NOTE],
  },
  {
    name: "events",
    usage: ["events <task-urn>", "events --prefix <urn>"],
    summary: "print the event log of one stream (a task URN), or follow resource writes below a URN",
    description:
      "Prints the event log of one stream (a task URN). With --prefix, follows a running Arbor's resource writes at and below a URN (needs ARBOR_URL and ARBOR_KEY).",
    options: [["--prefix <urn>", "follow the resource writes at and below this URN"]],
    examples: [
      "arbor events cld:common.Tenant.local/common.Conversation.c1/common.Message.m1/plan.Task.t1",
      "ARBOR_URL=http://127.0.0.1:8787 ARBOR_KEY=arbor_... arbor events --prefix cld:common.Tenant.acme",
    ],
    notes: [REMOTE_NOTE],
  },
  {
    name: "replay",
    usage: ["replay"],
    summary: "rebuild every task view from the event log and check it against the stored views",
    examples: ["arbor replay"],
  },
  {
    name: "help",
    usage: ["help [command]"],
    summary: "this text, or one command's usage, options and an example (as arbor <command> --help)",
    examples: ["arbor help team"],
  },
];

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

/** The command named `name`, if there is one. */
export const commandHelp = (name: string): CommandHelp | undefined => COMMANDS.find((c) => c.name === name);

/** A command's usage lines, as its errors print them: `Usage: arbor ...`, one way per line. */
export function usageOf(name: string): string {
  const command = commandHelp(name);
  if (!command) throw new Error(`No help for "${name}"`);
  return command.usage.map((u, i) => `${i === 0 ? "Usage:" : "      "} arbor ${u}`).join("\n");
}

const column = (rows: readonly (readonly [string, string])[]) => {
  const width = Math.min(28, Math.max(...rows.map(([left]) => left.length)) + 2);
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`.trimEnd()).join("\n");
};

/** `arbor help`: every command, one line each, the remote commands, the settings. */
export function globalHelp(): string {
  const list = column(COMMANDS.map((c) => [c.name, c.summary]));
  const remote = COMMANDS.filter((c) => c.notes?.some((n) => n.startsWith(REMOTE_NOTE))).map((c) => c.name);
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
  const parts = [usageOf(command.name), "", wrap(command.description ?? `${capital(command.summary)}.`)];
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
