import { type Command, UsageError } from "../command.ts";

export const evalCommand: Command = {
  name: "eval",
  usage: [
    "eval run <dataset> [--example offsite] [--team <file>] [--scorer <module>]... [--record <file> | --replay <file>] [--repeat <n>] [--concurrency <n>] [--label <text>] [--fail-under <score>]",
    "eval ls",
    "eval compare <experiment> <experiment> [--fail-on-regression]",
  ],
  summary: "run a dataset of cases, score each run, store the experiment, and compare two of them",
  description:
    "run runs every case of a dataset (JSONL or YAML: docs/evals.md) on the local runtime, answers each run's questions as the case says, scores it against the case's expectations, stores the experiment and prints its scores; ls lists the experiments; compare shows, per case and per scorer, what got better or worse between two experiments.",
  options: [
    ["--example offsite", "the offline scripted example and its team (no model needed)"],
    ["--team <file>", "apply this team file before the run (the change it makes is kept)"],
    [
      "--scorer <module>",
      "a scorer of your own: a module whose default export scores a run (docs/evals.md); repeatable",
    ],
    ["--record <file>", "keep every model response and tool result of the runs in this file (a recording)"],
    [
      "--replay <file>",
      "answer the model and the tools from a recording: no model call, no tool effect; a call it has not fails the run and is listed",
    ],
    ["--repeat <n>", "run every case n times (default 1)"],
    ["--concurrency <n>", "at most n runs at once (default 4)"],
    ["--label <text>", "a name for the experiment in lists (a branch, a prompt's version)"],
    ["--fail-under <score>", "exit 1 when the experiment's score (0 to 1) is below this"],
    ["--fail-on-regression", "compare: exit 1 when any case's score by any scorer went down"],
  ],
  examples: [
    "arbor eval run examples/offsite/eval.jsonl --example offsite --fail-under 0.9",
    "arbor eval compare 01KA... 01KB... --fail-on-regression",
  ],
  notes: [
    "It works on the local data folder (one process at a time, as arbor run does); with ARBOR_URL set it says so and does nothing.",
  ],

  async local({ args, options, write }) {
    if (process.env.ARBOR_URL)
      throw new UsageError(
        "arbor eval runs on the local data folder: unset ARBOR_URL for it. A remote Arbor's experiments are read with GET /v1/evals/experiments (admins), or in its console under Experiments",
      );
    const { localConfig } = await import("../lib/local.ts");
    const config = await localConfig(evalCommand);
    const lib = await import("../lib/eval.ts");
    const number = (name: string, value: string | undefined, min: number, max: number) => {
      if (value === undefined) return undefined;
      const n = Number(value);
      if (!Number.isFinite(n) || n < min || n > max)
        throw new UsageError(`--${name} takes a number from ${min} to ${max}, not ${JSON.stringify(value)}`);
      return n;
    };
    switch (args[0]) {
      case "run": {
        if (!args[1]) throw new UsageError("Name the dataset: arbor eval run <file.jsonl|file.yaml>");
        const repeat = number("repeat", options.repeat, 1, 100);
        const concurrency = number("concurrency", options.concurrency, 1, 64);
        const failUnder = number("fail-under", options["fail-under"], 0, 1);
        return lib.evalRun(
          config,
          {
            file: args[1],
            ...(options.example ? { example: options.example } : {}),
            ...(options.team ? { team: options.team } : {}),
            ...(options.label ? { label: options.label } : {}),
            ...(options.scorer?.length ? { scorers: options.scorer } : {}),
            ...(options.record ? { record: options.record } : {}),
            ...(options.replay ? { replay: options.replay } : {}),
            ...(repeat !== undefined ? { repeat: Math.floor(repeat) } : {}),
            ...(concurrency !== undefined ? { concurrency: Math.floor(concurrency) } : {}),
            ...(failUnder !== undefined ? { failUnder } : {}),
          },
          write,
        );
      }
      case "ls":
        return lib.evalList(config, write);
      case "compare":
        if (!args[1] || !args[2]) throw new UsageError("Name two experiments: arbor eval compare <a> <b>");
        return lib.evalCompare(
          config,
          args[1],
          args[2],
          { failOnRegression: options["fail-on-regression"] },
          write,
        );
      default:
        throw new UsageError();
    }
  },
};
