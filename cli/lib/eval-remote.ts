import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DATASET_NAME, type DatasetInfo } from "../../shared/evals/datasets.ts";
import type { Experiment } from "../../shared/evals/experiment.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { UsageError, type Write } from "../command.ts";
import { comparison, experimentLine, failedUnder, runLine, summary } from "./eval.ts";
import type { Remote } from "./remote.ts";
import { heading, note, printable } from "./render.ts";

/**
 * `arbor eval` against a remote Arbor (ARBOR_URL, ARBOR_KEY: an admin's key of the tenant), through
 * its HTTP API (shared/channels/http/http-evals.ts). The experiment runs there, driven by that
 * runtime (shared/evals/driver.ts); this process only starts it and follows it, so stopping the
 * command (Ctrl-C) leaves the experiment running: `arbor eval ls` finds it.
 */
export interface RemoteRunOptions {
  /** A dataset file here (sent as text), or the name of one the tenant keeps there. */
  dataset: string;
  label?: string;
  repeat?: number;
  concurrency?: number;
  timeoutSeconds?: number;
  failUnder?: number;
  /** How often the experiment is read while it runs (tests make it short). */
  everyMs?: number;
}

/** What cannot run on a remote Arbor, and why. */
export const LOCAL_ONLY = ["example", "team", "model", "judge-model", "scorer", "record", "replay"] as const;

export async function evalRunRemote(
  remote: Remote,
  options: RemoteRunOptions,
  write: Write,
): Promise<number> {
  const text = await readFile(options.dataset, "utf8").catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT" && DATASET_NAME.test(options.dataset)) return undefined; // a stored one's name
    throw new ValidationError(`Cannot read the dataset ${options.dataset}: ${e.message}`);
  });
  const { experiment } = await remote.post<{ experiment: Experiment }>(
    "/v1/evals/experiments",
    {
      ...(text === undefined
        ? { dataset: options.dataset }
        : {
            text,
            name: basename(options.dataset)
              .replace(/[^A-Za-z0-9._-]/g, "_")
              .slice(0, 100),
          }),
      ...(options.label ? { label: options.label } : {}),
      ...(options.repeat ? { repeat: options.repeat } : {}),
      ...(options.concurrency ? { concurrency: options.concurrency } : {}),
      ...(options.timeoutSeconds ? { timeoutSeconds: options.timeoutSeconds } : {}),
    },
    { shape: { experiment: "object" } },
  );
  const runs = experiment.cases * experiment.repeat;
  write(
    `${heading("Experiment")} ${experiment.id}: ${experiment.cases} case${experiment.cases === 1 ? "" : "s"} of ${printable(experiment.dataset)}, ${runs} run${runs === 1 ? "" : "s"}, on ${remote.url} (model ${printable(experiment.model)})`,
  );
  write(note("It runs there: stopping this command leaves it running (arbor eval ls)."));
  const shown = new Set<string>();
  for (;;) {
    const { experiment: now } = await remote.get<{ experiment: Experiment }>(
      `/v1/evals/experiments/${encodeURIComponent(experiment.id)}`,
      { experiment: "object" },
    );
    for (const run of now.runs) {
      const key = `${run.caseId}#${run.repeat}`;
      if (shown.has(key)) continue;
      shown.add(key);
      write(runLine(run, shown.size, runs));
    }
    if (now.status !== "running") {
      summary(now, write);
      return failedUnder(now, options.failUnder, write) ? 1 : 0;
    }
    await sleep(options.everyMs ?? 1_000);
  }
}

export async function evalUploadRemote(
  remote: Remote,
  file: string | undefined,
  name: string | undefined,
  write: Write,
): Promise<number> {
  if (!file) throw new UsageError("Name the dataset file: arbor eval upload <file> [--name <name>]");
  const text = await readFile(file, "utf8").catch((e: Error) => {
    throw new ValidationError(`Cannot read the dataset ${file}: ${e.message}`);
  });
  const as = name ?? basename(file).replace(/\.(jsonl|ya?ml|json)$/i, "");
  const { dataset } = await remote.put<{ dataset: DatasetInfo }>(
    `/v1/evals/datasets/${encodeURIComponent(as)}`,
    { text },
    { dataset: "object" },
  );
  write(
    `${heading("Uploaded")}: ${printable(dataset.name)}, ${dataset.cases} case${dataset.cases === 1 ? "" : "s"} (${dataset.bytes} bytes) to ${remote.url}`,
  );
  write(note(`Run it there: arbor eval run ${dataset.name}`));
  return 0;
}

export async function evalDatasetsRemote(remote: Remote, write: Write): Promise<number> {
  const { datasets } = await remote.get<{ datasets: DatasetInfo[] }>("/v1/evals/datasets", {
    datasets: "array",
  });
  if (datasets.length === 0) write("No datasets kept there yet: arbor eval upload <file>");
  for (const d of datasets)
    write(
      `${printable(d.name).padEnd(24)} ${String(d.cases).padStart(4)} cases  ${d.updatedAt.slice(0, 19).replace("T", " ")}  ${printable(d.updatedBy)}`,
    );
  return 0;
}

export async function evalListRemote(remote: Remote, write: Write): Promise<number> {
  const { experiments } = await remote.get<{ experiments: Omit<Experiment, "runs">[] }>(
    "/v1/evals/experiments",
    { experiments: "array" },
  );
  if (experiments.length === 0) write("No experiments there yet: arbor eval run <dataset>");
  for (const e of experiments) write(experimentLine(e));
  return 0;
}

export async function evalCompareRemote(
  remote: Remote,
  a: string,
  b: string,
  options: { failOnRegression: boolean },
  write: Write,
): Promise<number> {
  const read = async (id: string) =>
    (
      await remote.get<{ experiment: Experiment }>(`/v1/evals/experiments/${encodeURIComponent(id)}`, {
        experiment: "object",
      })
    ).experiment;
  const [before, after] = await Promise.all([read(a), read(b)]);
  return comparison(before, after, options, write);
}
