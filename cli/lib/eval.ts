import { readFile, writeFile } from "node:fs/promises";
import { basename, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { costText } from "../../shared/domain/budgets.ts";
import { endOfLife } from "../../shared/domain/model-catalogue.ts";
import { compareExperiments } from "../../shared/evals/compare.ts";
import { parseDataset } from "../../shared/evals/dataset.ts";
import type { RunResult } from "../../shared/evals/experiment.ts";
import {
  type Experiment,
  listExperiments,
  loadExperiment,
  runExperiment,
  storeExperiment,
} from "../../shared/evals/experiment.ts";
import {
  parseRecording,
  RecordingBook,
  RecordingLlm,
  Replay,
  recordingTools,
} from "../../shared/evals/recording.ts";
import { type CustomScorer, percent as pct } from "../../shared/evals/scorers.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { type LocalConfig, MODEL_HELP, type ModelConfig } from "../../shared/runtime/config.ts";
import { createModel } from "../../shared/runtime/models.ts";
import type { Write } from "../command.ts";
import { withRuntime } from "./local.ts";
import { heading, note, printable } from "./render.ts";
import { chooseModel, openLocalEngine } from "./run.ts";

/** What withRuntime needs to know of the command (its name, for the configuration's errors). */
const EVAL = { name: "eval" } as const;

/**
 * `arbor eval`: experiments on the local runtime (shared/evals/ does the work): run a dataset and
 * store the experiment, list the experiments, compare two. Exit codes make it a CI gate: 1 when
 * `--fail-under` is not met or `--fail-on-regression` finds one, 2 for a call that cannot run.
 */
export interface EvalRunOptions {
  file: string;
  example?: string;
  team?: string;
  label?: string;
  repeat?: number;
  concurrency?: number;
  failUnder?: number;
  /** Modules of the team's own scorers (their default export: scorers.ts ScorerFunction). */
  scorers?: readonly string[];
  /** Keep the runs' model responses and tool results in this file. */
  record?: string;
  /** Answer the model and the tools from this recording. */
  replay?: string;
  /** The model the cases run on: the configured provider's, another id. */
  model?: string;
  /** The model that judges (expect.judge): the configured provider's; default the one they run on. */
  judgeModel?: string;
  /** How long one run may take (default 120 s). */
  timeoutMs?: number;
}

/** The configured provider with another model id, checked as ARBOR_MODEL is. */
function modelWith(config: LocalConfig, id: string, option: string): ModelConfig {
  if (!config.model)
    throw new ValidationError(
      `${option} picks a model of the configured provider, and none is configured: set ARBOR_MODEL_PROVIDER (docs/models.md)`,
    );
  const retired = endOfLife(id);
  if (retired) throw new ValidationError(`${option} ${retired}`);
  return { ...config.model, model: id };
}

/** The team's scorers, each from its module's default export, named after its file. */
async function loadScorers(files: readonly string[]): Promise<CustomScorer[]> {
  return Promise.all(
    files.map(async (file) => {
      const loaded = (await import(pathToFileURL(resolve(file)).href).catch((e: Error) => {
        throw new ValidationError(`Cannot load the scorer ${file}: ${e.message}`);
      })) as { default?: unknown };
      if (typeof loaded.default !== "function")
        throw new ValidationError(
          `The scorer ${file} has no default export that is a function: export default ({ case, run }) => score`,
        );
      return { name: basename(file).replace(/\.[^.]+$/, ""), score: loaded.default as CustomScorer["score"] };
    }),
  );
}

const short = (id: string) => id.slice(-8);

export async function evalRun(config: LocalConfig, options: EvalRunOptions, write: Write): Promise<number> {
  const text = await readFile(options.file, "utf8").catch((e: NodeJS.ErrnoException) => {
    throw new ValidationError(
      `Cannot read the dataset ${options.file}: ${e.code === "ENOENT" ? "no such file" : e.message}`,
    );
  });
  const cases = parseDataset(text, basename(options.file));
  const scorers = await loadScorers(options.scorers ?? []);
  const team = options.team
    ? await readFile(options.team, "utf8").then(
        (t) => JSON.parse(t) as unknown,
        (e: Error) => {
          throw new ValidationError(`Cannot read the team file ${options.team}: ${e.message}`);
        },
      )
    : undefined;
  if (options.record && options.replay)
    throw new ValidationError("--record and --replay go one at a time: record a recording, then replay it");
  const replay = options.replay
    ? new Replay(
        parseRecording(
          await readFile(options.replay, "utf8").catch((e: Error) => {
            throw new ValidationError(`Cannot read the recording ${options.replay}: ${e.message}`);
          }),
          basename(options.replay),
        ),
      )
    : undefined;
  if (options.model && (options.example || options.replay))
    throw new ValidationError(
      `--model is the model the cases run on: ${options.example ? "the example runs on its script" : "a replay runs on its recording"}`,
    );
  if (options.model) config = { ...config, model: modelWith(config, options.model, "--model") };
  const judge = options.judgeModel
    ? createModel(modelWith(config, options.judgeModel, "--judge-model"))
    : undefined;
  // A replay needs no model (it is the recording); the example still brings its team.
  const chosen =
    options.example || !replay
      ? chooseModel(config, { text: "eval", example: options.example, lazy: false, yes: false })
      : undefined;
  if (!replay && !chosen) {
    process.stderr.write(`${MODEL_HELP}\n`);
    return 2;
  }
  const book = options.record && chosen ? new RecordingBook(chosen.llm.id) : undefined;
  const setup = replay
    ? { llm: replay.llm, ...(chosen?.assistants ? { assistants: chosen.assistants } : {}) }
    : book && chosen
      ? { ...chosen, llm: new RecordingLlm(chosen.llm, book) }
      : (chosen as NonNullable<typeof chosen>);
  const { rt, engine } = await openLocalEngine(
    config,
    setup,
    "arbor eval",
    replay ? (tools) => replay.tools(tools) : book ? (tools) => recordingTools(tools, book) : undefined,
  );
  const stop = engine.start();
  try {
    if (setup.assistants) await engine.registerAssistants(config.tenant, setup.assistants);
    if (team !== undefined) await engine.applyTeam(config.tenant, team);
    const runs = cases.length * (options.repeat ?? 1);
    write(
      `${heading("Experiment")}: ${cases.length} case${cases.length === 1 ? "" : "s"} of ${options.file}, ${runs} run${runs === 1 ? "" : "s"}, model ${setup.llm.id}`,
    );
    const experiment = await runExperiment(engine, cases, {
      tenant: config.tenant,
      dataset: basename(options.file),
      model: setup.llm.id,
      ...(options.label ? { label: options.label } : {}),
      ...(options.repeat ? { repeat: options.repeat } : {}),
      ...(options.concurrency ? { concurrency: options.concurrency } : {}),
      ...(scorers.length ? { scorers } : {}),
      ...(judge ? { judge } : {}),
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
      onRun: (run, done, total) => write(runLine(run, done, total)),
    });
    await storeExperiment(engine.deps.state, experiment);
    await rt.untilDurable();
    summary(experiment, write);
    if (book && options.record) {
      await writeFile(options.record, `${JSON.stringify(book.recording, null, 1)}\n`);
      const count = (o: Record<string, { responses?: unknown[]; results?: unknown[] }>) =>
        Object.values(o).reduce((n, c) => n + (c.responses ?? c.results ?? []).length, 0);
      write(
        `${heading("Recorded")}: ${count(book.recording.model_calls)} model responses and ${count(book.recording.tool_calls)} tool results to ${options.record}`,
      );
    }
    if (replay) {
      write(
        `${heading("Replayed")}: ${replay.modelAnswers} model calls answered from ${options.replay}, none made`,
      );
      if (replay.divergences.length > 0) {
        write(`${heading("Diverged")}: ${replay.divergences.length} call(s) the recording has not`);
        for (const d of replay.divergences)
          write(`  a ${d.kind} at ${printable(d.where)}: ${note(printable(d.detail))}`);
        return 1;
      }
    }
    return failedUnder(experiment, options.failUnder, write) ? 1 : 0;
  } finally {
    stop();
    await engine.close();
    await rt.close();
  }
}

/** One run as it ends: its score, and what fell short. */
export function runLine(run: RunResult, done: number, total: number): string {
  const short = run.scores
    .filter((s) => s.score < 1)
    .map((s) => `${s.scorer}: ${s.reason}`)
    .join("; ");
  return `  [${done}/${total}] ${run.caseId}${run.repeat > 1 ? ` #${run.repeat}` : ""}: ${pct(run.score)} (${run.status}, ${run.wallMs} ms)${run.score < 1 ? ` ${note(printable(short))}` : ""}`;
}

/** Whether the experiment's score is under `--fail-under` (said when so). */
export function failedUnder(e: Experiment, failUnder: number | undefined, write: Write): boolean {
  if (failUnder === undefined || e.score >= failUnder) return false;
  write(`${heading("Failed")}: the score ${pct(e.score)} is under --fail-under ${pct(failUnder)}`);
  return true;
}

/** An experiment in a list: when, its score, what it ran. */
export function experimentLine(e: Omit<Experiment, "runs">): string {
  return `${e.id}  ${e.startedAt.slice(0, 19).replace("T", " ")}  ${pct(e.score).padStart(7)}  ${e.cases} cases x${e.repeat}  ${printable(e.dataset)}  ${printable(e.model)}${e.label ? `  ${printable(e.label)}` : ""}${e.status === "running" ? `  ${note("running")}` : ""}`;
}

export function summary(e: Experiment, write: Write): void {
  write(
    `${heading("Score")}: ${pct(e.score)}  ${note(`experiment ${e.id}, ${(e.durationMs / 1000).toFixed(1)} s, ${e.tokens.toLocaleString("en-US")} tokens, ${costText(e)}`)}`,
  );
  for (const [scorer, score] of Object.entries(e.scorers).sort())
    write(`  ${scorer.padEnd(12)} ${pct(score)}`);
}

export async function evalList(config: LocalConfig, write: Write): Promise<number> {
  const experiments = await withRuntime(EVAL, (rt) => listExperiments(rt.state, config.tenant));
  if (experiments.length === 0) {
    write("No experiments yet: arbor eval run <dataset>");
    return 0;
  }
  for (const e of experiments) write(experimentLine(e));
  return 0;
}

export async function evalCompare(
  config: LocalConfig,
  a: string,
  b: string,
  options: { failOnRegression: boolean },
  write: Write,
): Promise<number> {
  // Reads only: no lock, beside a running serve.
  const [before, after] = await withRuntime(EVAL, (rt) =>
    Promise.all([loadExperiment(rt.state, config.tenant, a), loadExperiment(rt.state, config.tenant, b)]),
  );
  for (const [id, e] of [
    [a, before],
    [b, after],
  ] as const)
    if (!e)
      throw new ValidationError(
        `No experiment ${id} here (or more than one ends so): arbor eval ls lists them`,
      );
  return comparison(before as Experiment, after as Experiment, options, write);
}

/** Two experiments compared, per scorer and per case; 1 with --fail-on-regression when one got worse. */
export function comparison(
  before: Experiment,
  after: Experiment,
  options: { failOnRegression: boolean },
  write: Write,
): number {
  if (before.status === "running" || after.status === "running")
    write(note("One of them is still running: only its scored runs are compared."));
  const c = compareExperiments(before, after);
  write(
    `${heading("Compared")}: ${short(c.a.id)} -> ${short(c.b.id)}   score ${pct(c.a.score)} -> ${pct(c.b.score)}`,
  );
  for (const s of c.scorers)
    write(
      `  ${s.scorer.padEnd(12)} ${s.before === undefined ? "-" : pct(s.before)} -> ${s.after === undefined ? "-" : pct(s.after)}`,
    );
  write(`${heading("Worse")}: ${c.regressions.length}`);
  for (const r of c.regressions)
    write(`  ${r.caseId} ${r.scorer}: ${pct(r.before)} -> ${pct(r.after)}  ${note(printable(r.reason))}`);
  write(`${heading("Better")}: ${c.improvements.length}`);
  for (const r of c.improvements) write(`  ${r.caseId} ${r.scorer}: ${pct(r.before)} -> ${pct(r.after)}`);
  if (c.onlyIn.a.length || c.onlyIn.b.length)
    write(
      note(
        `Only in ${short(c.a.id)}: ${c.onlyIn.a.join(", ") || "none"}; only in ${short(c.b.id)}: ${c.onlyIn.b.join(", ") || "none"}`,
      ),
    );
  return options.failOnRegression && c.regressions.length > 0 ? 1 : 0;
}
