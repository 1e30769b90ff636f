// One bench case in a process of its own: a thin wrapper over bench/workloads.ts (treeOnArbor /
// requestsOnArbor) that prints one JSON line (the peer bench's format), with process CPU per run.
// `npm run bench -- --baseline <ref>` copies this file into the other commit's bench/ folder and runs
// it there too, so it only uses what workloads.ts has long had.
// Usage: LLM_MS=0 WARMUP=0 RUNS=39 DURABLE=1 node bench/perf-case.ts w1|w2
// CPU per run covers the whole treeOnArbor/requestsOnArbor call (open + run + view walk + close);
// FIXED=n adds n calls of requestsOnArbor(1,1) at the end to estimate that fixed part.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { requestsOnArbor, treeOnArbor, W1_SHAPE } from "./workloads.ts";

// TRACING=1: spans and metrics on, exported over OTLP (http/protobuf) to a sink in a process of its
// own, as to a collector; what tracing costs is then the difference with TRACING=0 (the default).
if (process.env.TRACING === "1") {
  const { spawn } = await import("node:child_process");
  const sink = spawn(
    process.execPath,
    [
      "-e",
      "require('node:http').createServer((q,s)=>{q.resume();q.on('end',()=>s.end())}).listen(0,'127.0.0.1',function(){process.stdout.write(this.address().port+'\\n')})",
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const port = await new Promise<string>((resolve) =>
    sink.stdout.once("data", (d) => resolve(String(d).trim())),
  );
  process.on("exit", () => sink.kill());
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${port}`;
  const { startTelemetry } = await import("../shared/runtime/telemetry.ts");
  await startTelemetry("arbor-bench");
}

const LLM_MS = Number(process.env.LLM_MS ?? 0);
const WARMUP = Number(process.env.WARMUP ?? 0);
const RUNS = Number(process.env.RUNS ?? 39);
const DURABLE = process.env.DURABLE !== "0";
const FIXED = Number(process.env.FIXED ?? 0);
const workload = process.argv[2] ?? "w1";
const baseDir = mkdtempSync(join(process.env.BENCH_TMP ?? tmpdir(), "perfcase-"));
const opts = { baseDir, durable: DURABLE, latencyMs: LLM_MS, timeoutMs: 300_000 };
const r = (x: number, d = 2) => Number(x.toFixed(d));
const median = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return (s.length % 2 ? s[m] : ((s[m - 1] as number) + (s[m] as number)) / 2) as number;
};
const pct = (a: number[], p: number) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] as number;
};
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;

const rssAfterImport = process.memoryUsage().rss;
const out: Record<string, unknown> = {
  peer: "arbor",
  workload,
  llm_ms: LLM_MS,
  durable: DURABLE,
  warmup: WARMUP,
  runs: RUNS,
  node: process.version,
  rss_after_import_mb: r(rssAfterImport / 2 ** 20, 1),
};
try {
  if (workload === "w1") {
    const walls: number[] = [];
    const cpus: number[] = [];
    const callWalls: number[] = [];
    for (let i = -WARMUP; i < RUNS; i++) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const run = await treeOnArbor(W1_SHAPE, opts);
      callWalls.push(performance.now() - t0);
      cpus.push(cpuMs(process.cpuUsage(c0)));
      if (run.done !== run.tasks || run.tasks !== 111) throw new Error(`tree: ${run.done}/${run.tasks} done`);
      walls.push(run.wallMs);
    }
    out.walls_ms = walls.map((w) => r(w));
    out.cpu_ms = cpus.map((c) => r(c, 1));
    out.call_walls_ms = callWalls.map((w) => r(w));
  } else if (workload === "w2") {
    const rps: number[] = [];
    const lat: number[] = [];
    const cpus: number[] = [];
    for (let i = -WARMUP; i < RUNS; i++) {
      const c0 = process.cpuUsage();
      const run = await requestsOnArbor(1000, 50, opts);
      const cpu = cpuMs(process.cpuUsage(c0));
      if (run.done !== 1000) throw new Error(`w2: ${run.done}/1000 done`);
      if (i >= 0) {
        rps.push((1000 / run.wallMs) * 1000);
        lat.push(...run.latenciesMs);
        cpus.push(cpu);
      }
    }
    out.rps = rps.map((x) => r(x, 1));
    out.rps_median = r(median(rps), 1);
    out.p50_ms = r(pct(lat, 50), 2);
    out.p99_ms = r(pct(lat, 99), 2);
    out.cpu_ms_per_run = cpus.map((c) => r(c, 1));
  } else throw new Error("workload must be w1 or w2");
  if (FIXED > 0) {
    const fixed: number[] = [];
    for (let i = 0; i < FIXED; i++) {
      const c0 = process.cpuUsage();
      try {
        await requestsOnArbor(1, 1, { ...opts, timeoutMs: 15_000 });
        fixed.push(cpuMs(process.cpuUsage(c0)));
      } catch {
        // bench race at some commits (fixed by f39aa07): the request ended before the observer listened
        fixed.push(-1);
      }
    }
    out.fixed_cpu_ms = fixed.map((c) => r(c, 1));
  }
  out.peak_rss_mb = r(process.resourceUsage().maxRSS / 1024, 1);
  process.stdout.write(`${JSON.stringify(out)}\n`);
} finally {
  rmSync(baseDir, { recursive: true, force: true });
}
process.exit(0);
