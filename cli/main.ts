import { parseArgs } from "node:util";
import { isArborError } from "../shared/kernel/errors.ts";
import { type Command, globalHelp, helpFor, OPTIONS, type Options, UsageError, usageOf } from "./command.ts";
import { COMMANDS, commandNamed } from "./commands/index.ts";

// The command table (cli/commands/) is all a start loads: each command imports its work when it
// runs, so `arbor help` and `arbor keys` start in a fraction of the time the local runtime, the
// AWS clients or the policy engines take to load. The settings too (config.ts and zod).

const write = (line: string) => process.stdout.write(`${line}\n`);

// A reader that went away (`arbor ls --all | head`) has all it wanted: the command ends quietly,
// as a pipeline expects, rather than with an unhandled EPIPE and its stack trace.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(process.exitCode ?? 0);
});

/** The command being run, for the usage lines under an error. */
let running: Command | undefined;

/**
 * The words and options of a call. A call the parser refuses (an unknown option, an option
 * without its value) is a usage error of the command it names, whose usage lines are printed
 * under it, as for every other wrong call.
 */
function parse(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: OPTIONS,
    });
  } catch (error) {
    if (!String((error as { code?: string }).code).startsWith("ERR_PARSE_ARGS")) throw error;
    running = commandNamed(argv.find((a) => !a.startsWith("-")) ?? "");
    const problem = (error as Error).message;
    throw new UsageError(running ? problem : `${problem}\nRun: arbor help`);
  }
}

async function main(argv: string[]): Promise<void> {
  const { positionals, values } = parse(argv);
  const options: Options = values;
  const [name = "help", ...args] = positionals;
  if (options.help || name === "help") {
    // `arbor help`, `arbor --help`: every command; `arbor <command> --help`, `arbor help <command>`: that one.
    const topic =
      name !== "help" ? name : (args[0] ?? (options.help && positionals.length ? "help" : undefined));
    if (topic === undefined) return void process.stdout.write(globalHelp(COMMANDS));
    const found = commandNamed(topic);
    if (!found) throw new UsageError(`Unknown command "${topic}". Run: arbor help`);
    return void process.stdout.write(helpFor(found));
  }
  const command = commandNamed(name);
  if (!command) throw new UsageError(`Unknown command "${name}". Run: arbor help`);
  running = command;
  const call = { args, options, write };
  // With ARBOR_URL: a remote Arbor, through its HTTP API, for the commands that can.
  const { loadRemoteConfig } = await import("../shared/runtime/config.ts");
  const remoteConfig = command.remote ? loadRemoteConfig() : undefined;
  let code: unknown;
  if (remoteConfig && command.remote) {
    const { checkTenantOption, Remote } = await import("./lib/remote.ts");
    const remote = new Remote(remoteConfig);
    // A remote Arbor acts on its key's tenant only: another --tenant is refused before anything.
    await checkTenantOption(remote, options.tenant);
    code = await command.remote(call, remote);
  } else if (command.local) code = await command.local(call);
  else throw new UsageError(`arbor ${name} speaks to a remote Arbor: set ARBOR_URL and ARBOR_KEY`);
  if (typeof code === "number") process.exitCode = code;
}

main(process.argv.slice(2)).catch((e: unknown) => {
  const err = e as Error;
  const usage = e instanceof UsageError && running ? usageOf(running) : undefined;
  // A usage error is the person's to fix from the usage lines: no code to look up.
  const message = isArborError(e) && !(e instanceof UsageError) ? `${err.message} [${e.code}]` : err.message;
  if (usage && !err.message) process.stderr.write(`${usage}\n`);
  else process.stderr.write(`arbor: ${message}\n${usage ? `${usage}\n` : ""}`);
  process.exitCode = 1;
});
