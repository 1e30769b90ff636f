import { statfs, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import {
  type ArborOptions,
  type CallCounts,
  type MemoryRun,
  requestsInMemory,
  requestsOnArbor,
  treeInMemory,
  treeOnArbor,
  treeSize,
  W1_SHAPE,
} from "./workloads.ts";

/**
 * `npm run bench`: orchestration overhead of the local runtime with durable writes, against an
 * in-memory `Promise.all` lower bound measured in the same process. See bench/README.md.
 *
 *   --only w1|w2     run one workload family (for profiling)
 *   --dir <path>     where the temporary data folders go (default: the OS temp dir)
 *   --repeat <n>     measure each W1 line n times and keep the median (default 3; W2 runs once)
 */
const out = (line = ""): void => {
  process.stdout.write(`${line}\n`);
};

interface Args {
  only: "w1" | "w2" | undefined;
  dir: string;
  repeat: number;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { only: undefined, dir: tmpdir(), repeat: 3 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (flag === "--only" && (value === "w1" || value === "w2")) args.only = value;
    else if (flag === "--dir" && value) args.dir = resolve(value);
    else if (flag === "--repeat" && value && /^[1-9]$/.test(value)) args.repeat = Number(value);
    else throw new Error(`Unknown argument ${flag ?? ""}: use --only w1|w2, --dir <path>, --repeat <1-9>`);
    i++;
  }
  return args;
}

// A full collection between measurements, so one workload's garbage is not billed to the next.
setFlagsFromString("--expose_gc");
const gc = runInNewContext("gc") as () => void;

/** Peak RSS while `work` runs: process.memoryUsage.rss() every 10 ms, plus before and after. */
async function withPeakRss<T>(work: () => Promise<T>): Promise<{ value: T; peakRssMb: number }> {
  let peak = process.memoryUsage.rss();
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 10);
  try {
    const value = await work();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { value, peakRssMb: peak / 2 ** 20 };
  } finally {
    clearInterval(timer);
  }
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

const median = (values: readonly number[]): number => percentile(values, 50);

interface Line {
  name: string;
  workload: "W1" | "W2";
  durable: boolean;
  latencyMs: number;
  tasks: number;
  done: number;
  repeats: number;
  wallMs: number;
  allWallMs: number[];
  boundMs: number;
  ratio: number;
  overheadPerTaskMs: number;
  p50Ms: number;
  p99Ms: number;
  boundP50Ms: number;
  boundP99Ms: number;
  latencyOf: string;
  peakRssMb: number;
  calls: CallCounts;
  boundCalls: CallCounts;
  deadLetters: number;
  elected?: Record<string, number>;
}

function line(
  base: Pick<Line, "name" | "workload" | "durable" | "latencyMs" | "tasks" | "latencyOf">,
  runs: {
    wallMs: number;
    done: number;
    latencies: number[];
    calls: CallCounts;
    deadLetters: number;
    bound: MemoryRun;
    peakRssMb: number;
    elected?: Record<string, number>;
  }[],
): Line {
  // The median run by wall time stands for the line; its bound is the one measured beside it.
  const byWall = [...runs].sort((a, b) => a.wallMs - b.wallMs);
  const run = byWall[Math.floor((byWall.length - 1) / 2)] as (typeof runs)[number];
  return {
    ...base,
    done: run.done,
    repeats: runs.length,
    wallMs: run.wallMs,
    allWallMs: runs.map((r) => r.wallMs),
    boundMs: run.bound.wallMs,
    ratio: run.wallMs / run.bound.wallMs,
    overheadPerTaskMs: (run.wallMs - run.bound.wallMs) / base.tasks,
    p50Ms: percentile(run.latencies, 50),
    p99Ms: percentile(run.latencies, 99),
    boundP50Ms: percentile(run.bound.latenciesMs, 50),
    boundP99Ms: percentile(run.bound.latenciesMs, 99),
    peakRssMb: Math.max(...runs.map((r) => r.peakRssMb)),
    calls: run.calls,
    boundCalls: run.bound.calls,
    deadLetters: run.deadLetters,
    ...(run.elected ? { elected: run.elected } : {}),
  };
}

async function measureW1(
  name: string,
  latencyMs: number,
  durable: boolean,
  args: Args,
  timeoutMs: number,
): Promise<Line> {
  const runs = [];
  for (let r = 0; r < args.repeat; r++) {
    gc();
    const bound = await treeInMemory(W1_SHAPE, latencyMs);
    gc();
    const options: ArborOptions = { baseDir: args.dir, durable, latencyMs, timeoutMs };
    const { value, peakRssMb } = await withPeakRss(() => treeOnArbor(W1_SHAPE, options));
    runs.push({ ...value, latencies: value.leafLatenciesMs, bound, peakRssMb });
    process.stderr.write(`  ${name} run ${r + 1}/${args.repeat}: ${value.wallMs.toFixed(0)} ms\n`);
  }
  return line(
    { name, workload: "W1", durable, latencyMs, tasks: treeSize(W1_SHAPE), latencyOf: "leaf" },
    runs,
  );
}

async function measureW2(
  requests: number,
  inFlight: number,
  args: Args,
  timeoutMs: number,
): Promise<Line> {
  gc();
  const bound = await requestsInMemory(requests, inFlight, 0);
  gc();
  const options: ArborOptions = { baseDir: args.dir, durable: true, latencyMs: 0, timeoutMs };
  const { value, peakRssMb } = await withPeakRss(() => requestsOnArbor(requests, inFlight, options));
  process.stderr.write(`  W2: ${value.wallMs.toFixed(0)} ms\n`);
  return line(
    {
      name: `W2 ${requests} req, ${inFlight} in flight`,
      workload: "W2",
      durable: true,
      latencyMs: 0,
      tasks: requests,
      latencyOf: "request",
    },
    [{ ...value, latencies: value.latenciesMs, bound, peakRssMb }],
  );
}

const FS_TYPES: Record<number, string> = {
  0xef53: "ext2/3/4",
  0x01021994: "tmpfs",
  0x794c7630: "overlayfs",
  0x58465342: "xfs",
  0x9123683e: "btrfs",
};

const f = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : "-");

function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? "").length))) ?? [];
  const fmt = (r: string[]) =>
    `| ${r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join(" | ")} |`;
  const [head, ...body] = rows;
  return [fmt(head ?? []), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...body.map(fmt)];
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const started = performance.now();
  const fs = await statfs(args.dir);
  const fsType = FS_TYPES[Number(fs.type)] ?? `0x${Number(fs.type).toString(16)}`;
  out(
    `arbor bench: node ${process.version}, ${cpus().length} CPU(s) (${cpus()[0]?.model ?? "?"}), ` +
      `data folders under ${args.dir} (${fsType})`,
  );

  // Warm-up: a small tree and a few requests, not reported (module loading, JIT, first SQLite file).
  process.stderr.write("warming up...\n");
  const warm: ArborOptions = { baseDir: args.dir, durable: true, latencyMs: 0, timeoutMs: 60_000 };
  await treeOnArbor({ children: 2, leavesPerChild: 3 }, warm);
  await treeInMemory({ children: 2, leavesPerChild: 3 }, 0);
  await requestsOnArbor(10, 5, warm);
  await requestsInMemory(10, 5, 0);

  const lines: Line[] = [];
  if (args.only !== "w2") {
    lines.push(await measureW1("W1 111 tasks, 0 ms", 0, true, args, 60_000));
    lines.push(await measureW1("W1 111 tasks, 0 ms, durable off", 0, false, args, 60_000));
    lines.push(await measureW1("W1 111 tasks, 50 ms", 50, true, args, 60_000));
  }
  if (args.only !== "w1") lines.push(await measureW2(1000, 50, args, 180_000));

  out();
  out(
    `Wall = Arbor, submit to the root's output; bound = the same model calls in memory (Promise.all). ` +
      `W1: median of ${args.repeat} run(s).`,
  );
  for (const row of table([
      [
        "workload",
        "durable",
        "LLM calls (Arbor/bound)",
        "wall ms",
        "bound ms",
        "wall/bound",
        "overhead ms/task",
        "p50 ms",
        "p99 ms",
        "bound p50/p99 ms",
        "peak RSS MB",
        "done",
      ],
      ...lines.map((l) => [
        l.name,
        l.durable ? "on" : "off",
        `${l.calls.total} / ${l.boundCalls.total}`,
        f(l.wallMs),
        f(l.boundMs),
        `${f(l.ratio, 2)}x`,
        f(l.overheadPerTaskMs, 2),
        `${f(l.p50Ms)} (${l.latencyOf})`,
        f(l.p99Ms),
        `${f(l.boundP50Ms)} / ${f(l.boundP99Ms)}`,
        f(l.peakRssMb, 0),
        `${l.done}/${l.tasks}`,
      ]),
    ]))
    out(row);

  const w1slow = lines.find((l) => l.workload === "W1" && l.latencyMs === 50);
  const critical = w1slow
    ? (() => {
        const ideal = 5 * w1slow.latencyMs; // plan + leaf tool call + leaf answer + child eval + root eval
        const issue = 300;
        return { idealMs: ideal, issueTargetMs: issue, ratioToIdeal: w1slow.wallMs / ideal, ratioToIssue: w1slow.wallMs / issue };
      })()
    : undefined;
  if (critical && w1slow) {
    out();
    out(
      `W1 at 50 ms: ideal critical path ${critical.idealMs} ms (5 sequential calls: plan, leaf tool call, ` +
        `leaf answer, child evaluation, root evaluation); the issue's figure is ${critical.issueTargetMs} ms.`,
    );
    out(
      `  wall ${f(w1slow.wallMs)} ms = ${f(critical.ratioToIdeal, 3)}x the ideal ${critical.idealMs} ms ` +
        `(target 1.15x: ${critical.ratioToIdeal <= 1.15 ? "met" : "NOT met"}), ` +
        `${f(critical.ratioToIssue, 3)}x the issue's ${critical.issueTargetMs} ms ` +
        `(target 1.15x: ${critical.ratioToIssue <= 1.15 ? "met" : "NOT met"}); bound ${f(w1slow.boundMs)} ms`,
    );
  }
  const instant = lines.filter((l) => l.latencyMs === 0 && l.durable);
  if (instant.length) {
    out(
      `Overhead at 0 ms (target < 1 ms/task): ${instant
        .map((l) => `${l.workload} ${f(l.overheadPerTaskMs, 2)} ms/task (${l.overheadPerTaskMs < 1 ? "met" : "NOT met"})`)
        .join(", ")}`,
    );
  }
  out(
    `LLM calls: ${lines
      .map((l) => `${l.workload}${l.latencyMs ? `@${l.latencyMs}ms` : ""} plan ${l.calls.plan} + leaf ${l.calls.leaf} + evaluation ${l.calls.evaluation}`)
      .filter((s, i, all) => all.indexOf(s) === i)
      .join("; ")}`,
  );
  for (const l of lines) {
    if (l.deadLetters > 0 || l.done !== l.tasks)
      out(`WARNING ${l.name}: ${l.done}/${l.tasks} tasks done, ${l.deadLetters} dead-lettered deliveries`);
  }
  const elected = lines.find((l) => l.elected)?.elected;
  if (elected)
    out(`Election (W1): ${Object.entries(elected).map(([k, v]) => `${k} ${v}`).join(", ")}`);

  const file = join(tmpdir(), "arbor-bench-results.json");
  const results = {
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    dataDir: args.dir,
    fsType,
    repeat: args.repeat,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
    totalMs: performance.now() - started,
    lines,
    ...(critical ? { w1CriticalPath: critical } : {}),
  };
  await writeFile(file, `${JSON.stringify(results, null, 2)}\n`);
  out(`Results (JSON): ${file}; total ${f((performance.now() - started) / 1000)} s`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
