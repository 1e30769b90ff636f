import { type Command, type Options, REMOTE_NOTE, UsageError } from "../command.ts";

export const evalCommand: Command = {
  name: "eval",
  usage: [
    "eval run <dataset> [--example offsite] [--team <file>] [--model <id>] [--judge-model <id>] [--scorer <module>]... [--record <file> | --replay <file>] [--repeat <n>] [--concurrency <n>] [--timeout <seconds>] [--label <text>] [--fail-under <score>]",
    "eval ls",
    "eval compare <experiment> <experiment> [--fail-on-regression]",
    "eval upload <file> [--name <name>]",
    "eval datasets",
  ],
  summary: "run a dataset of cases, score each run, store the experiment, and compare two of them",
  description:
    "run runs a dataset's cases (JSONL or YAML: docs/evals.md), their questions answered as each case says, scores every run and stores the experiment; ls lists experiments; compare shows what got better or worse.",
  options: [
    [
      "--example offsite",
      "the offline example and its team; --team <file>: a team file applied first (kept)",
    ],
    ["--model, --judge-model <id>", "the model the cases run on, and the one that judges (the provider's)"],
    ["--scorer <module>", "a scorer of your own: its default export scores a run; repeatable"],
    [
      "--record, --replay <file>",
      "keep the runs' model and tool answers in a file; answer from one, calling nothing",
    ],
    ["--repeat, --concurrency <n>", "run every case n times (1); at most n runs at once (4)"],
    ["--timeout <seconds>", "a run still going then is canceled and scored a timeout (120)"],
    ["--label <text>", "a name in lists (a branch, a prompt's version); upload: --name <name>"],
    ["--fail-under <score>", "exit 1 when the experiment's score (0 to 1) is below this"],
    ["--fail-on-regression", "compare: exit 1 when any case's score by any scorer went down"],
  ],
  examples: [
    "arbor eval run examples/offsite/eval.jsonl --example offsite --fail-under 0.9",
    "arbor eval compare 01KA... 01KB... --fail-on-regression",
  ],
  notes: [`${REMOTE_NOTE} There: an admin's key, its team and model.`],

  async remote({ args, options, write }, remote) {
    const lib = await import("../lib/eval-remote.ts");
    switch (args[0]) {
      case "run": {
        if (!args[1])
          throw new UsageError("Name the dataset: arbor eval run <file.jsonl|file.yaml|kept name>");
        const local = lib.LOCAL_ONLY.filter((o) => {
          const v = options[o];
          return v !== undefined && !(Array.isArray(v) && v.length === 0);
        });
        if (local.length > 0)
          throw new UsageError(
            `--${local.join(", --")} ${local.length === 1 ? "is" : "are"} for the local runtime: unset ARBOR_URL to run here, or leave ${local.length === 1 ? "it" : "them"} out to run on ${remote.url} with its own team and model`,
          );
        const timeout = number("timeout", options.timeout, 10, 3600);
        return lib.evalRunRemote(
          remote,
          {
            dataset: args[1],
            ...(options.label ? { label: options.label } : {}),
            ...runNumbers(options),
            ...(timeout !== undefined ? { timeoutSeconds: Math.floor(timeout) } : {}),
          },
          write,
        );
      }
      case "ls":
        return lib.evalListRemote(remote, write);
      case "datasets":
        return lib.evalDatasetsRemote(remote, write);
      case "upload":
        return lib.evalUploadRemote(remote, args[1], options.name, write);
      case "compare":
        return lib.evalCompareRemote(remote, ...compared(args, options), write);
      default:
        throw new UsageError();
    }
  },

  async local({ args, options, write }) {
    const { localConfig } = await import("../lib/local.ts");
    const config = await localConfig(evalCommand);
    const lib = await import("../lib/eval.ts");
    switch (args[0]) {
      case "run": {
        if (!args[1]) throw new UsageError("Name the dataset: arbor eval run <file.jsonl|file.yaml>");
        const timeout = number("timeout", options.timeout, 1, 3600);
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
            ...(options.model ? { model: options.model } : {}),
            ...(options["judge-model"] ? { judgeModel: options["judge-model"] } : {}),
            ...(timeout !== undefined ? { timeoutMs: Math.floor(timeout * 1000) } : {}),
            ...runNumbers(options),
          },
          write,
        );
      }
      case "ls":
        return lib.evalList(config, write);
      case "upload":
      case "datasets":
        throw new UsageError(
          `arbor eval ${args[0]} speaks to a running Arbor (arbor serve here, or a deployed stack): set ARBOR_URL and ARBOR_KEY (an admin's key)`,
        );
      case "compare":
        return lib.evalCompare(config, ...compared(args, options), write);
      default:
        throw new UsageError();
    }
  },
};

function number(name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max)
    throw new UsageError(`--${name} takes a number from ${min} to ${max}, not ${JSON.stringify(value)}`);
  return n;
}

/** --repeat, --concurrency and --fail-under, checked, as both runtimes take them. */
function runNumbers(options: Options) {
  const repeat = number("repeat", options.repeat, 1, 100);
  const concurrency = number("concurrency", options.concurrency, 1, 64);
  const failUnder = number("fail-under", options["fail-under"], 0, 1);
  return {
    ...(repeat !== undefined ? { repeat: Math.floor(repeat) } : {}),
    ...(concurrency !== undefined ? { concurrency: Math.floor(concurrency) } : {}),
    ...(failUnder !== undefined ? { failUnder } : {}),
  };
}

/** compare's two experiments and its gate, as both runtimes take them. */
function compared(args: readonly string[], options: Options) {
  const [, a, b] = args;
  if (!a || !b) throw new UsageError("Name two experiments: arbor eval compare <a> <b>");
  return [a, b, { failOnRegression: options["fail-on-regression"] }] as const;
}
