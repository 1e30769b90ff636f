import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  type BenchEnv,
  benchEnv,
  cpuMs,
  folderBytes,
  offsiteText,
  pct,
  post,
  type Served,
  settle,
  sleep,
  startServe,
  threadCpuMs,
  vm,
} from "./serve-child.ts";

/**
 * `npm run bench:burst`: what history does to `arbor serve` (issue 22), against a real server child
 * process (`--example offsite`, the offline scripted model, rate limits off).
 *
 * Burst mode (the default): a burst of `--burst` requests (200) fired at once, all POSTs in flight
 * together, on a fresh server; then `--history` requests (10,000) driven to their end through the
 * same server, `--concurrency` (32) at a time (each posted, polled, its invitations approved, as
 * bench/sustained.ts does: the history is what real requests leave); a burst again after each
 * point of `--at` and at the end, and once more after the server is restarted on that history.
 * A burst's accept time is from the first POST to the last 202; "all done" is until every one of
 * its requests has ended. Each point is measured `--repeat` times (2), one burst after another.
 *
 *   npm run bench:burst -- [--burst 200] [--history 10000] [--at 2500,5000] [--concurrency 32] [--repeat 2]
 *
 * Steady mode: `--rate` requests a second (3), each driven to its end, for `--warmup` minutes (2)
 * and then `--minutes` (10), the server's RSS (VmRSS) sampled every 10 s; prints the series and
 * the drift after the warm-up. `--snapshots <dir>` gives the server `--heapsnapshot-signal` and
 * asks it for a heap snapshot at the end of the warm-up, halfway and at the end (compare them in
 * Chrome DevTools' Memory tab, "Comparison", or by constructor counts).
 *
 *   npm run bench:burst -- --steady [--rate 3] [--minutes 10] [--warmup 2] [--snapshots <dir>]
 *
 * `--cpu-prof <dir>` profiles the server's main thread during each burst's accept phase (from the
 * first POST to the last 202: bench/cpu-profile-signal.mjs), one `<pid>-<n>.cpuprofile` per burst
 * in `<dir>`; `node bench/cpu-profile-top.ts <files>` lists their top functions.
 *
 * `--keep` keeps the folder with the history (its path is printed; the server's data and keys
 * file), and `--reuse <folder>` measures on such a folder instead of building the history again:
 * bursts on a fresh server, then on a server started on that folder (which the bursts add to: pass
 * a copy to measure the same history twice).
 *
 * `--interleave <rounds>` (with `--reuse`) alternates the two: each round starts a server on a new
 * empty folder and one on the reused folder, bursts once on each (in turn first: fresh, history;
 * then history, fresh), each when the server has gone idle after its start, and stops it once the
 * burst has ended. On a shared machine whose load changes by the minute, the pairs see the same
 * load, and the medians over the rounds say more than any one burst. Beside the wall time, each
 * burst's accept phase is measured in the server's CPU time, all threads and the main thread's
 * alone (the event loop: what the accept waits on), from /proc; and so until the burst has ended:
 * how much work a request is, which a busy machine does not change as it changes wall times (nor
 * as it changes how much of that work falls inside the accept phase).
 *
 * Both take `--dir <path>` (where the data folder goes, default the OS temp dir; removed after
 * unless `--keep`).
 */
const out = (line = ""): void => {
  process.stdout.write(`${line}\n`);
};
const progress = (line: string): void => {
  process.stderr.write(`  ${line}\n`);
};

interface Args {
  steady: boolean;
  burst: number;
  history: number;
  at: number[];
  concurrency: number;
  repeat: number;
  rate: number;
  minutes: number;
  warmup: number;
  snapshots: string | undefined;
  cpuProf: string | undefined;
  keep: boolean;
  reuse: string | undefined;
  interleave: number;
  dir: string;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = {
    steady: false,
    burst: 200,
    history: 10_000,
    at: [],
    concurrency: 32,
    repeat: 2,
    rate: 3,
    minutes: 10,
    warmup: 2,
    snapshots: undefined,
    cpuProf: undefined,
    keep: false,
    reuse: undefined,
    interleave: 0,
    dir: tmpdir(),
  };
  const usage =
    "use --burst <n>, --history <n>, --at <n,n...>, --concurrency <n>, --repeat <n>, " +
    "--cpu-prof <dir>, --keep, --reuse <dir>, --interleave <rounds>, --steady, --rate <n>, --minutes <n>, --warmup <n>, --snapshots <dir>, --dir <path>";
  const num = (flag: string, v: string | undefined) => {
    if (!v || !/^\d+(\.\d+)?$/.test(v)) throw new Error(`${flag} takes a number: ${usage}`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === "--steady" || flag === "--keep") {
      if (flag === "--steady") args.steady = true;
      else args.keep = true;
      continue;
    }
    i++;
    if (flag === "--burst") args.burst = num(flag, value);
    else if (flag === "--history") args.history = num(flag, value);
    else if (flag === "--at") args.at = (value ?? "").split(",").map((v) => num(flag, v));
    else if (flag === "--concurrency") args.concurrency = num(flag, value);
    else if (flag === "--repeat") args.repeat = Math.max(1, num(flag, value));
    else if (flag === "--rate") args.rate = num(flag, value);
    else if (flag === "--minutes") args.minutes = num(flag, value);
    else if (flag === "--warmup") args.warmup = num(flag, value);
    else if (flag === "--snapshots" && value) args.snapshots = resolve(value);
    else if (flag === "--cpu-prof" && value) args.cpuProf = resolve(value);
    else if (flag === "--reuse" && value) args.reuse = resolve(value);
    else if (flag === "--dir" && value) args.dir = resolve(value);
    else if (flag === "--interleave") args.interleave = num(flag, value);
    else throw new Error(`Unknown argument ${flag ?? ""}: ${usage}`);
  }
  if (args.interleave > 0 && !args.reuse) throw new Error(`--interleave needs --reuse <folder>: ${usage}`);
  return args;
}

const f = (n: number, d = 0) => n.toFixed(d);

interface BurstResult {
  point: string;
  historyRequests: number;
  dataMb: number;
  acceptMs: number;
  acceptP50Ms: number;
  doneMs: number;
  serverCpuMsAccept: number;
  /** The main thread's (the event loop's) share of serverCpuMsAccept. */
  mainCpuMsAccept: number;
  /** serverCpuMsAccept by thread name (threadCpuMs). */
  threadsCpuMsAccept: Record<string, number>;
  /** The server's CPU time (all threads) from the first POST until every request of the burst has ended. */
  serverCpuMsDone: number;
  /** The main thread's share of serverCpuMsDone. */
  mainCpuMsDone: number;
  rssMb: number;
}

/** Fires `n` POSTs at once; the time to the last 202, then until every request has ended. */
async function burst(
  s: Served,
  auth: Record<string, string>,
  n: number,
  from: number,
  profile: boolean,
): Promise<Omit<BurstResult, "point" | "historyRequests" | "dataMb">> {
  if (profile) {
    s.child.kill("SIGTTIN");
    await sleep(200); // the profiler starts
  }
  const [cpu0, threads0] = await Promise.all([cpuMs(s.pid), threadCpuMs(s.pid)]);
  const t0 = performance.now();
  const accepted: number[] = [];
  const roots = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const root = await post(s.url, auth, offsiteText(from + i));
      accepted.push(performance.now() - t0);
      return root;
    }),
  );
  const acceptMs = performance.now() - t0;
  const [cpu1, threads1] = await Promise.all([cpuMs(s.pid), threadCpuMs(s.pid)]);
  const serverCpuMsAccept = cpu1 - cpu0;
  const threadsCpuMsAccept = Object.fromEntries(
    [...threads1].map(([name, ms]) => [name, ms - (threads0.get(name) ?? 0)] as const),
  );
  if (profile) s.child.kill("SIGTTIN");
  const statuses = await Promise.all(roots.map((root) => settle(s.url, auth, root)));
  const doneMs = performance.now() - t0;
  const [cpu2, threads2] = await Promise.all([cpuMs(s.pid), threadCpuMs(s.pid)]);
  const notDone = statuses.filter((st) => st !== "done").length;
  if (notDone > 0) progress(`WARNING: ${notDone} of the burst's requests did not end done`);
  return {
    acceptMs,
    acceptP50Ms: pct(
      accepted.sort((a, b) => a - b),
      0.5,
    ),
    doneMs,
    serverCpuMsAccept,
    mainCpuMsAccept: threadsCpuMsAccept.MainThread ?? Number.NaN,
    threadsCpuMsAccept,
    serverCpuMsDone: cpu2 - cpu0,
    mainCpuMsDone: (threads2.get("MainThread") ?? Number.NaN) - (threads0.get("MainThread") ?? Number.NaN),
    rssMb: (await vm(s.pid, "VmRSS")) / 1024,
  };
}

/** Drives `count` requests to their end, `concurrency` at a time. */
async function history(
  s: Served,
  auth: Record<string, string>,
  count: number,
  concurrency: number,
  from: number,
): Promise<void> {
  let next = 0;
  let settled = 0;
  const t0 = performance.now();
  const client = async () => {
    for (let i = next++; i < count; i = next++) {
      await settle(s.url, auth, await post(s.url, auth, offsiteText(from + i)));
      if (++settled % 1000 === 0)
        progress(
          `${settled} of ${count} history requests, ${f((settled / (performance.now() - t0)) * 1000, 1)}/s`,
        );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
}

async function burstMode(args: Args, dir: string): Promise<void> {
  const b = await benchEnv(dir);
  const reused = args.reuse ? await benchEnv(args.reuse, { existing: true }) : undefined;
  if (args.cpuProf) {
    await mkdir(args.cpuProf, { recursive: true });
    b.env.ARBOR_BENCH_CPU_PROFILE_DIR = args.cpuProf;
  }
  const serverOptions = args.cpuProf
    ? [`--import=${join(import.meta.dirname, "cpu-profile-signal.mjs")}`]
    : [];
  let s = await startServe(b, serverOptions);
  const results: BurstResult[] = [];
  let requests = 0;
  const measure = async (point: string, on: BenchEnv = b) => {
    for (let r = 0; r < args.repeat; r++) {
      const dataMb = (await folderBytes(on.dataDir)) / 2 ** 20;
      const historyRequests = requests;
      const m = await burst(s, on.auth, args.burst, requests, args.cpuProf !== undefined);
      requests += args.burst;
      const row = { point, historyRequests, dataMb, ...m };
      results.push(row);
      progress(
        `${point}${args.cpuProf ? ` (server ${s.pid})` : ""}: accepted in ${f(m.acceptMs)} ms, all done in ${f(m.doneMs)} ms (${historyRequests} requests before)`,
      );
    }
  };
  try {
    out(`arbor burst bench: bursts of ${args.burst}, history ${args.history}, ${s.url} (pid ${s.pid})`);
    const loadAtStart = loadavg()[0] ?? 0;
    await measure("fresh server");
    const points = reused ? [] : [...new Set([...args.at.filter((a) => a < args.history), args.history])];
    let built = 0;
    for (const point of points) {
      await history(s, b.auth, point - built, args.concurrency, requests);
      requests += point - built;
      built = point;
      await measure(`after ${point} history`);
    }
    await s.stop();
    if (reused) {
      if (args.cpuProf) reused.env.ARBOR_BENCH_CPU_PROFILE_DIR = args.cpuProf;
      s = await startServe(reused, serverOptions);
      await measure(`started on ${args.reuse}`, reused);
    } else {
      s = await startServe(b, serverOptions);
      await measure(`restarted on ${built} history`);
    }
    out();
    out(
      "| point | requests before | data MB | accept ms (last 202) | accept p50 ms | all done ms | server CPU ms to accept | main thread CPU ms | RSS MB | accept / fresh |",
    );
    out("|---|---|---|---|---|---|---|---|---|---|");
    const fresh = results.filter((r) => r.point === "fresh server").map((r) => r.acceptMs);
    const freshMs = fresh.reduce((a, x) => a + x, 0) / Math.max(1, fresh.length);
    for (const r of results)
      out(
        `| ${r.point} | ${r.historyRequests} | ${f(r.dataMb)} | ${f(r.acceptMs)} | ${f(r.acceptP50Ms)} | ${f(r.doneMs)} | ${f(r.serverCpuMsAccept)} | ${f(r.mainCpuMsAccept)} | ${f(r.rssMb)} | ${f(r.acceptMs / freshMs, 2)}x |`,
      );
    const worst = Math.max(...results.filter((r) => r.point !== "fresh server").map((r) => r.acceptMs));
    out();
    out(
      `Worst burst with history: ${f(worst / freshMs, 2)}x the fresh server's mean accept time (${f(freshMs)} ms): ` +
        `${worst / freshMs <= 1.5 ? "within" : "NOT within"} the 1.5x target.`,
    );
    out(`1-minute load average: ${f(loadAtStart, 2)} at the start, ${f(loadavg()[0] ?? 0, 2)} at the end.`);
    const file = join(tmpdir(), "arbor-bench-burst.json");
    await writeFile(file, `${JSON.stringify({ at: new Date().toISOString(), args, results }, null, 2)}\n`);
    out(`Numbers as JSON: ${file}`);
  } catch (error) {
    throw new Error(`${String(error)}; the server's stderr ends:\n${s.log()}`);
  } finally {
    await s.stop();
  }
}

/**
 * Waits until the server's CPU use has been under a tenth of a core for two looks in a row, half a
 * second apart (at most 60 s): what it does when it starts (reading its records, resuming work)
 * is not the burst's.
 */
async function untilIdle(s: Served): Promise<void> {
  let quiet = 0;
  for (const t0 = performance.now(); quiet < 2 && performance.now() - t0 < 60_000; ) {
    const before = await cpuMs(s.pid);
    await sleep(500);
    quiet = (await cpuMs(s.pid)) - before < 50 ? quiet + 1 : 0;
  }
}

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** --interleave: fresh and history bursts in turn, each on a server just started and gone idle. */
async function interleavedMode(args: Args, dir: string): Promise<void> {
  const reused = await benchEnv(args.reuse as string, { existing: true });
  const serverOptions = args.cpuProf
    ? [`--import=${join(import.meta.dirname, "cpu-profile-signal.mjs")}`]
    : [];
  if (args.cpuProf) {
    await mkdir(args.cpuProf, { recursive: true });
    reused.env.ARBOR_BENCH_CPU_PROFILE_DIR = args.cpuProf;
  }
  const results: (BurstResult & { round: number })[] = [];
  const loadAtStart = loadavg()[0] ?? 0;
  const loads: number[] = [];
  out(
    `arbor burst bench: ${args.interleave} rounds, a burst of ${args.burst} fresh and on ${args.reuse} in turn`,
  );
  let historyRequests = 0;
  for (let round = 0; round < args.interleave; round++) {
    const order = round % 2 === 0 ? (["fresh", "history"] as const) : (["history", "fresh"] as const);
    for (const which of order) {
      const freshDir = join(dir, `fresh-${round}`);
      if (which === "fresh") await mkdir(freshDir);
      const b = which === "fresh" ? await benchEnv(freshDir) : reused;
      if (args.cpuProf) b.env.ARBOR_BENCH_CPU_PROFILE_DIR = args.cpuProf;
      const s = await startServe(b, serverOptions);
      try {
        await untilIdle(s);
        const dataMb = (await folderBytes(b.dataDir)) / 2 ** 20;
        loads.push(loadavg()[0] ?? 0);
        const m = await burst(s, b.auth, args.burst, 1_000_000 + historyRequests, args.cpuProf !== undefined);
        if (which === "history") historyRequests += args.burst;
        results.push({
          round,
          point: which,
          historyRequests: which === "fresh" ? 0 : historyRequests,
          dataMb,
          ...m,
        });
        progress(
          `round ${round + 1} ${which}${args.cpuProf ? ` (server ${s.pid})` : ""}: accepted in ${f(m.acceptMs)} ms, ` +
            `server CPU ${f(m.serverCpuMsAccept)} ms (main thread ${f(m.mainCpuMsAccept)} ms), all done in ${f(m.doneMs)} ms ` +
            `(server CPU ${f(m.serverCpuMsDone)} ms, main thread ${f(m.mainCpuMsDone)} ms), load ${f(loads.at(-1) ?? 0, 1)}`,
        );
      } catch (error) {
        throw new Error(`${String(error)}; the server's stderr ends:\n${s.log()}`);
      } finally {
        await s.stop();
        if (which === "fresh") await rm(freshDir, { recursive: true, force: true });
      }
    }
  }
  out();
  out(
    "| round | server | data MB | accept ms (last 202) | accept p50 ms | all done ms | server CPU ms to accept | main thread CPU ms | other threads (ms) |",
  );
  out("|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const others = Object.entries(r.threadsCpuMsAccept)
      .filter(([name, ms]) => name !== "MainThread" && ms >= 10)
      .map(([name, ms]) => `${name} ${f(ms)}`)
      .join(", ");
    out(
      `| ${r.round + 1} | ${r.point} | ${f(r.dataMb)} | ${f(r.acceptMs)} | ${f(r.acceptP50Ms)} | ${f(r.doneMs)} | ${f(r.serverCpuMsAccept)} | ${f(r.mainCpuMsAccept)} | ${others} |`,
    );
  }
  const of = (point: string, k: (r: BurstResult) => number) =>
    median(results.filter((r) => r.point === point).map(k));
  out();
  out(`Medians over ${args.interleave} rounds (history / fresh):`);
  out("| | fresh | history | history / fresh |");
  out("|---|---|---|---|");
  const rows: [string, (r: BurstResult) => number][] = [
    ["accept ms (last 202)", (r) => r.acceptMs],
    ["accept p50 ms", (r) => r.acceptP50Ms],
    ["server CPU ms to accept", (r) => r.serverCpuMsAccept],
    ["main thread CPU ms to accept", (r) => r.mainCpuMsAccept],
    ["all done ms", (r) => r.doneMs],
    ["server CPU ms, first POST to all done", (r) => r.serverCpuMsDone],
    ["main thread CPU ms, first POST to all done", (r) => r.mainCpuMsDone],
  ];
  for (const [label, k] of rows)
    out(
      `| ${label} | ${f(of("fresh", k))} | ${f(of("history", k))} | ${f(of("history", k) / of("fresh", k), 2)}x |`,
    );
  const ratios = results
    .filter((r) => r.point === "history")
    .map(
      (h) =>
        h.acceptMs /
        (results.find((r) => r.point === "fresh" && r.round === h.round) as BurstResult).acceptMs,
    );
  out();
  out(
    `Accept time, history / fresh within each round: ${ratios.map((x) => f(x, 2)).join(", ")} (median ${f(median(ratios), 2)}x): ` +
      `${median(ratios) <= 1.5 ? "within" : "NOT within"} the 1.5x target.`,
  );
  out(
    `1-minute load average: ${f(loadAtStart, 2)} at the start, ${f(median(loads), 2)} median before the bursts, ${f(loadavg()[0] ?? 0, 2)} at the end.`,
  );
  const file = join(tmpdir(), "arbor-bench-burst.json");
  await writeFile(file, `${JSON.stringify({ at: new Date().toISOString(), args, results }, null, 2)}\n`);
  out(`Numbers as JSON: ${file}`);
}

interface Sample {
  atS: number;
  rssMb: number;
  done: number;
  inFlight: number;
  cpuMs: number;
}

async function steadyMode(args: Args, dir: string): Promise<void> {
  const b = await benchEnv(dir);
  if (args.snapshots) await mkdir(args.snapshots, { recursive: true });
  const memoryFile = join(dir, "memory.jsonl");
  b.env.ARBOR_BENCH_MEMORY_FILE = memoryFile;
  const s = await startServe(b, [
    `--import=${join(import.meta.dirname, "memory-sampler.mjs")}`,
    ...(args.snapshots ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${args.snapshots}`] : []),
  ]);
  try {
    const totalMs = (args.warmup + args.minutes) * 60_000;
    out(
      `arbor steady bench: ${args.rate} requests/s for ${args.warmup} + ${args.minutes} min, ${s.url} (pid ${s.pid})`,
    );
    const loadAtStart = loadavg()[0] ?? 0;
    const t0 = performance.now();
    const samples: Sample[] = [];
    const latencies: number[] = [];
    let posted = 0;
    let done = 0;
    let failed: unknown;
    let lost = 0;
    const inFlight = new Set<Promise<void>>();
    const sample = async () =>
      samples.push({
        atS: (performance.now() - t0) / 1000,
        rssMb: (await vm(s.pid, "VmRSS")) / 1024,
        done,
        inFlight: inFlight.size,
        cpuMs: await cpuMs(s.pid),
      });
    const snapshotsAt = args.snapshots
      ? [args.warmup * 60_000, (args.warmup + args.minutes / 2) * 60_000]
      : [];
    await sample();
    let nextSample = 10_000;
    while (performance.now() - t0 < totalMs && failed === undefined) {
      const due = (posted * 1000) / args.rate;
      const now = performance.now() - t0;
      if (now >= due) {
        const i = posted++;
        const t = performance.now();
        const p: Promise<void> = (async () =>
          settle(s.url, b.auth, await post(s.url, b.auth, offsiteText(i))))().then(
          () => {
            done++;
            latencies.push(performance.now() - t);
            inFlight.delete(p);
          },
          (e: unknown) => {
            // A request lost to a connection the server closed while a heap snapshot held it
            // (its keep-alive timer ran out meanwhile) is counted; anything else ends the run.
            // (post() wraps fetch's TypeError in an Error of its own, as its cause.)
            if (args.snapshots && (e instanceof TypeError || (e as Error).cause instanceof TypeError)) lost++;
            else failed = e;
            inFlight.delete(p);
          },
        );
        inFlight.add(p);
      }
      if (now >= nextSample) {
        await sample();
        const last = samples.at(-1) as Sample;
        progress(`${f(last.atS)} s: RSS ${f(last.rssMb)} MB, ${done} done, ${inFlight.size} in flight`);
        nextSample += 10_000;
        if (snapshotsAt.length > 0 && now >= (snapshotsAt[0] as number)) {
          snapshotsAt.shift();
          s.child.kill("SIGUSR2");
        }
      }
      const nextDue = (posted * 1000) / args.rate;
      await sleep(Math.max(0, Math.min(nextDue, nextSample) - (performance.now() - t0)));
    }
    await Promise.all(inFlight);
    if (failed !== undefined) throw failed;
    await sample();
    if (args.snapshots) {
      s.child.kill("SIGUSR2");
      await sleep(15_000); // writing the snapshot takes a few seconds
    }
    const warm = samples.filter((x) => x.atS >= args.warmup * 60);
    const first = warm[0] as Sample;
    const last = warm.at(-1) as Sample;
    const rss = warm.map((x) => x.rssMb);
    // The server's own view, every 10 s of its life (bench/memory-sampler.mjs), per thread: the
    // main thread's JS heap, the workers' (the vector index's), and what is neither (native).
    const lines = (await readFile(memoryFile, "utf8").catch(() => ""))
      .split("\n")
      .filter(Boolean)
      .map(
        (l) =>
          JSON.parse(l) as { thread: string; atS: number; spaces?: Record<string, number> } & Record<
            string,
            number
          >,
      );
    const mains = lines.filter((l) => l.thread === "main");
    const mb = (n: number | undefined) => f((n ?? Number.NaN) / 2 ** 20);
    out();
    out(
      "| s | RSS MB | requests done | in flight | server CPU s | main heap used / total MB | of which young generation MB | workers' heap used / total MB | external MB | RSS - heaps MB |",
    );
    out("|---|---|---|---|---|---|---|---|---|---|");
    for (const x of samples) {
      // The server's samples nearest in time (its clock started a moment before the bench's).
      const m = mains.find((l) => l.atS >= x.atS - 5);
      const workers = [...new Set(lines.filter((l) => l.thread !== "main").map((l) => l.thread))].map((t) =>
        lines.find((l) => l.thread === t && l.atS >= x.atS - 5),
      );
      const wUsed = workers.reduce((a, w) => a + (w?.heapUsed ?? 0), 0);
      const wTotal = workers.reduce((a, w) => a + (w?.heapTotal ?? 0), 0);
      out(
        `| ${f(x.atS)} | ${f(x.rssMb)} | ${x.done} | ${x.inFlight} | ${f(x.cpuMs / 1000, 1)} | ` +
          (m
            ? `${mb(m.heapUsed)} / ${mb(m.heapTotal)} | ${mb(m.spaces?.new_space)} | ${mb(wUsed)} / ${mb(wTotal)} | ${mb(m.external)} | ${mb((m.rss ?? 0) - (m.heapTotal ?? 0) - wTotal)} |`
            : "- | - | - | - | - |"),
      );
    }
    const minutes = (last.atS - first.atS) / 60;
    const drift = last.rssMb / first.rssMb - 1;
    out();
    latencies.sort((a, c) => a - c);
    out(
      `${done} requests done${lost > 0 ? ` (${lost} lost to a connection closed during a heap snapshot)` : ""}, ${f(done / last.atS, 2)}/s; latency p50 ${f(pct(latencies, 0.5))} ms, p99 ${f(pct(latencies, 0.99))} ms`,
    );
    out(
      `After the ${args.warmup}-minute warm-up: RSS ${f(first.rssMb)} -> ${f(last.rssMb)} MB over ${f(minutes, 1)} min ` +
        `(${drift >= 0 ? "+" : ""}${f(drift * 100, 1)}%, ${f((last.rssMb - first.rssMb) / minutes, 1)} MB/min; ` +
        `min ${f(Math.min(...rss))}, max ${f(Math.max(...rss))}): ` +
        `${Math.max(...rss) <= first.rssMb * 1.1 ? "within" : "NOT within"} 10%.`,
    );
    out(`1-minute load average: ${f(loadAtStart, 2)} at the start, ${f(loadavg()[0] ?? 0, 2)} at the end.`);
    const file = join(tmpdir(), "arbor-bench-steady.json");
    await writeFile(file, `${JSON.stringify({ at: new Date().toISOString(), args, samples }, null, 2)}\n`);
    out(`Numbers as JSON: ${file}`);
  } catch (error) {
    throw new Error(`${String(error)}; the server's stderr ends:\n${s.log()}`);
  } finally {
    await s.stop();
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dir = await mkdtemp(join(args.dir, "arbor-bench-burst-"));
  try {
    await (args.steady
      ? steadyMode(args, dir)
      : args.interleave > 0
        ? interleavedMode(args, dir)
        : burstMode(args, dir));
  } finally {
    if (args.keep) out(`The data folder and keys file are kept in ${dir} (--reuse it on a copy)`);
    else await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
