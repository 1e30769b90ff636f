import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";

/**
 * `npm run bench -- --baseline <git ref>`: the same cases on this tree (with its uncommitted
 * changes) and on <ref>, in the same sitting, each case in a fresh process, the two sides
 * interleaved (this, ref; then ref, this; ...), and the ratios printed: CPU per task and per
 * request beside wall time, so that a change that doubles the CPU cannot pass unseen because the
 * second core hid it from the wall clock.
 *
 * The ref is checked out once into a worktree under the OS temp dir (reused while the ref names the
 * same commit) with its own `npm ci`; bench/perf-case.ts is copied into it, so both sides run the
 * same case code over their own bench/workloads.ts. A tree made for Node 24 (its engines) runs its
 * TypeScript natively; an older one through the tsx it installs.
 */
export interface BaselineArgs {
  ref: string;
  passes: number;
  dir: string;
}

interface Case {
  name: string;
  workload: "w1" | "w2";
  env: Record<string, string>;
}

const CASES: Case[] = [
  { name: "W1 111 tasks, 0 ms", workload: "w1", env: { RUNS: "15", WARMUP: "10", FIXED: "7" } },
  { name: "W2 1000 requests, 50 in flight, 0 ms", workload: "w2", env: { RUNS: "2", WARMUP: "1" } },
];

/** What one case process measured (bench/perf-case.ts's JSON line), reduced to the compared numbers. */
interface Measured {
  cpuMsPerUnit: number;
  wallMs?: number;
  fixedCpuMs?: number;
  requestsPerSecond?: number;
  p50Ms?: number;
  p99Ms?: number;
}

interface Side {
  label: string;
  root: string;
}

const ROOT = join(import.meta.dirname, "..");
const CASE_FILE = join(import.meta.dirname, "perf-case.ts");

export async function runBaseline(
  args: BaselineArgs,
  out: (line?: string) => void,
  progress: (line: string) => void,
): Promise<void> {
  const here: Side = { label: `this tree (${describeTree(ROOT)})`, root: ROOT };
  const sha = git(ROOT, "rev-parse", "--verify", `${args.ref}^{commit}`);
  const there: Side = { label: `${args.ref} (${sha.slice(0, 7)})`, root: prepareWorktree(sha, progress) };
  copyFileSync(CASE_FILE, join(there.root, "bench", "perf-case.ts"));

  const loadAtStart = loadavg()[0] ?? 0;
  out(`arbor bench --baseline ${args.ref}: node ${process.version}, ${args.passes} passes, interleaved`);
  const results = new Map<string, { here: Measured[]; there: Measured[] }>();
  for (let pass = 0; pass < args.passes; pass++) {
    const order = pass % 2 === 0 ? [here, there] : [there, here];
    for (const c of CASES) {
      for (const side of order) {
        progress(`pass ${pass + 1}/${args.passes}: ${c.name} on ${side.label}`);
        const m = await runCase(side, c, args.dir);
        const entry = results.get(c.name) ?? { here: [], there: [] };
        (side === here ? entry.here : entry.there).push(m);
        results.set(c.name, entry);
        out(`  pass ${pass + 1} ${c.workload} ${side === here ? "this" : args.ref}: ${summary(c, m)}`);
      }
    }
  }
  const loadAtEnd = loadavg()[0] ?? 0;

  out();
  out(`| case | measure | ${here.label} | ${there.label} | ratio |`);
  out("|---|---|---|---|---|");
  for (const c of CASES) {
    const r = results.get(c.name);
    if (!r) continue;
    const row = (measure: string, pick: (m: Measured) => number | undefined, digits: number) => {
      const a = median(r.here.map(pick));
      const b = median(r.there.map(pick));
      const ratio = a !== undefined && b !== undefined && b > 0 ? `${(a / b).toFixed(2)}x` : "-";
      out(`| ${c.name} | ${measure} | ${fmt(a, digits)} | ${fmt(b, digits)} | ${ratio} |`);
    };
    if (c.workload === "w1") {
      row("CPU ms per task", (m) => m.cpuMsPerUnit, 2);
      row("wall ms per tree", (m) => m.wallMs, 0);
      row("fixed CPU ms (open, 1 request, close)", (m) => m.fixedCpuMs, 1);
    } else {
      row("CPU ms per request", (m) => m.cpuMsPerUnit, 2);
      row("requests/s", (m) => m.requestsPerSecond, 0);
      row("p50 ms", (m) => m.p50Ms, 1);
      row("p99 ms", (m) => m.p99Ms, 1);
    }
  }
  out();
  out(
    `Medians over ${args.passes} passes; each pass ran every case once per side in a fresh process. ` +
      "CPU is the process's user + system time over the measured calls (all threads), the fixed part " +
      "the median of runs of one single-leaf request on a freshly opened runtime.",
  );
  out(`1-minute load average: ${loadAtStart.toFixed(2)} at the start, ${loadAtEnd.toFixed(2)} at the end.`);
}

function runCase(side: Side, c: Case, dir: string): Promise<Measured> {
  // A tree made for Node 24 (engines) runs its TypeScript natively; an older one through its tsx.
  const engines = (
    JSON.parse(readFileSync(join(side.root, "package.json"), "utf8")) as { engines?: { node?: string } }
  ).engines?.node;
  const viaTsx =
    !/>=\s*(2[4-9]|[3-9]\d)/.test(engines ?? "") && existsSync(join(side.root, "node_modules", "tsx"));
  const argv = [...(viaTsx ? ["--import", "tsx"] : []), "bench/perf-case.ts", c.workload];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, {
      cwd: side.root,
      env: { ...process.env, ...c.env, LLM_MS: "0", DURABLE: "1", BENCH_TMP: dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 600_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      const last = stdout.trim().split("\n").pop() ?? "";
      if (code !== 0 || !last.startsWith("{"))
        return reject(new Error(`${c.name} on ${side.label} failed (exit ${code}):\n${stderr}`));
      resolve(measured(c, JSON.parse(last) as Record<string, unknown>));
    });
  });
}

function measured(c: Case, j: Record<string, unknown>): Measured {
  const nums = (k: string) => ((j[k] as number[] | undefined) ?? []).filter((x) => x >= 0);
  const runs = Number(j.runs);
  if (c.workload === "w1") {
    // perf-case records the warm-up runs too (first): only the measured ones count.
    const cpu = nums("cpu_ms").slice(-runs);
    const walls = nums("walls_ms").slice(-runs);
    return {
      cpuMsPerUnit: (median(cpu) ?? Number.NaN) / 111,
      wallMs: median(walls) ?? Number.NaN,
      fixedCpuMs: median(nums("fixed_cpu_ms")) ?? Number.NaN,
    };
  }
  return {
    cpuMsPerUnit: (median(nums("cpu_ms_per_run")) ?? Number.NaN) / 1000,
    requestsPerSecond: Number(j.rps_median),
    p50Ms: Number(j.p50_ms),
    p99Ms: Number(j.p99_ms),
  };
}

const summary = (c: Case, m: Measured): string =>
  c.workload === "w1"
    ? `CPU ${fmt(m.cpuMsPerUnit, 2)} ms/task, wall ${fmt(m.wallMs, 0)} ms/tree, fixed CPU ${fmt(m.fixedCpuMs, 1)} ms`
    : `CPU ${fmt(m.cpuMsPerUnit, 2)} ms/request, ${fmt(m.requestsPerSecond, 0)} req/s, p50 ${fmt(m.p50Ms, 1)} / p99 ${fmt(m.p99Ms, 1)} ms`;

/** A worktree of `sha` with its dependencies installed, reused while its lock file is unchanged. */
function prepareWorktree(sha: string, progress: (line: string) => void): string {
  const dir = join(tmpdir(), `arbor-bench-baseline-${sha.slice(0, 12)}`);
  if (!existsSync(join(dir, ".git"))) {
    progress(`checking out ${sha.slice(0, 7)} into ${dir}`);
    git(ROOT, "worktree", "add", "--force", "--detach", dir, sha);
  }
  const lock = join(dir, "package-lock.json");
  const marker = join(dir, "node_modules", ".arbor-bench-lock");
  const hash = createHash("sha256").update(readFileSync(lock)).digest("hex");
  if (!existsSync(marker) || readFileSync(marker, "utf8") !== hash) {
    progress(`installing ${sha.slice(0, 7)}'s dependencies (npm ci, once)`);
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: dir, stdio: "ignore" });
    writeFileSync(marker, hash);
  }
  return dir;
}

function describeTree(root: string): string {
  const head = git(root, "rev-parse", "--short", "HEAD");
  const dirty = git(root, "status", "--porcelain", "--untracked-files=no").length > 0;
  return dirty ? `${head} + changes` : head;
}

function git(cwd: string, ...argv: string[]): string {
  return execFileSync("git", argv, { cwd, encoding: "utf8" }).trim();
}

function median(values: readonly (number | undefined)[]): number | undefined {
  const s = values.filter((v): v is number => v !== undefined && Number.isFinite(v)).sort((a, b) => a - b);
  if (s.length === 0) return undefined;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

const fmt = (n: number | undefined, digits: number): string =>
  n === undefined || !Number.isFinite(n) ? "-" : n.toFixed(digits);
