import { type Command, REMOTE_NOTE, UsageError } from "../command.ts";

export const run: Command = {
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

  async local({ args, options }) {
    const { localConfig } = await import("../lib/local.ts");
    const config = await localConfig(run);
    const { runCommand } = await import("../lib/run.ts");
    return runCommand(config, {
      text: args[0],
      example: options.example,
      lazy: options.lazy,
      yes: options.yes,
    });
  },

  async remote({ args, options }, remote) {
    if (options.example) throw new UsageError("--example runs on the local runtime: unset ARBOR_URL for it");
    const { remoteRun } = await import("../lib/remote-commands.ts");
    return remoteRun(remote, { text: args[0], lazy: options.lazy, yes: options.yes });
  },
};
