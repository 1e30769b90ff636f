import type { Command } from "../command.ts";
import { demo } from "./demo.ts";
import { dlq } from "./dlq.ts";
import { docs } from "./docs.ts";
import { evalCommand } from "./eval.ts";
import { events } from "./events.ts";
import { get } from "./get.ts";
import { graph } from "./graph.ts";
import { keys } from "./keys.ts";
import { ls } from "./ls.ts";
import { notify } from "./notify.ts";
import { policy } from "./policy.ts";
import { replay } from "./replay.ts";
import { run } from "./run.ts";
import { serve } from "./serve.ts";
import { team } from "./team.ts";
import { tools } from "./tools.ts";

/**
 * Every command of the `arbor` CLI, in the order `arbor help` lists them. One file per command
 * holds its help and how it runs, locally and against a remote Arbor (cli/command.ts says how).
 * `help` itself is main.ts's: it reads this table.
 */
export const COMMANDS: readonly Command[] = [
  run,
  serve,
  evalCommand,
  keys,
  policy,
  dlq,
  notify,
  team,
  tools,
  docs,
  graph,
  demo,
  ls,
  get,
  events,
  replay,
  {
    name: "help",
    usage: ["help [command]"],
    summary: "this text, or one command's usage, options and an example (as arbor <command> --help)",
    examples: ["arbor help team"],
  },
];

/** The command named `name`, if there is one. */
export const commandNamed = (name: string): Command | undefined => COMMANDS.find((c) => c.name === name);
