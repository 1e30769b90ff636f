import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  benchEnv,
  offsiteText,
  pct,
  post,
  type Served,
  settle,
  sleep,
  startServe,
  vm,
} from "./serve-child.ts";

/**
 * `npm run bench:sustained`: N requests (default 10,000) in one tenant through a real `arbor serve`
 * child process (`--example offsite`: the offline scripted model, instant), `--concurrency` clients
 * (default 16) each posting a request, polling its root task, approving the invitations when the
 * request asks, until the request ends. Prints requests/s and latency p50/p99 (post to
 * end) for the first and the last thousand, the slowest /healthz answer in each (probed every
 * second), the server's peak RSS (VmHWM) and its RSS after 10 s idle at the end.
 *
 *   --requests <n>  --concurrency <n>  --dir <path>
 *
 * The server and the client are bench/serve-child.ts's (rate limits off; ARBOR_BENCH_SERVER_NODE_OPTIONS
 * becomes the server's NODE_OPTIONS, e.g. `--report-on-fatalerror --report-directory=/tmp/r`, and
 * ARBOR_BENCH_SERVER_STDERR names a file that receives the server's whole stderr). No request may
 * take longer than 2 minutes.
 */
const out = (line = ""): void => {
  process.stdout.write(`${line}\n`);
};

interface Args {
  requests: number;
  concurrency: number;
  dir: string;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { requests: 10_000, concurrency: 16, dir: tmpdir() };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (flag === "--requests" && value && /^\d+$/.test(value)) args.requests = Number(value);
    else if (flag === "--concurrency" && value && /^\d+$/.test(value)) args.concurrency = Number(value);
    else if (flag === "--dir" && value) args.dir = resolve(value);
    else
      throw new Error(`Unknown argument ${flag ?? ""}: use --requests <n>, --concurrency <n>, --dir <path>`);
  }
  return args;
}

interface Done {
  index: number;
  startedAt: number;
  endedAt: number;
  status: string;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const dir = await mkdtemp(join(args.dir, "arbor-bench-sustained-"));
  let served: Served | undefined;
  try {
    const b = await benchEnv(dir);
    const auth = b.auth;
    served = await startServe(b);
    const server = served.child;
    const { url } = served;
    const log = served.log;
    const pid = served.pid;
    out(`arbor sustained bench: ${args.requests} requests, ${args.concurrency} clients, ${url} (pid ${pid})`);
    const loadAtStart = loadavg()[0] ?? 0;

    const started = performance.now();
    const done: Done[] = [];
    const health: { at: number; ms: number }[] = [];
    let stop = false;
    const prober = (async () => {
      while (!stop) {
        const t = performance.now();
        await fetch(`${url}/healthz`).then(
          (r) => r.arrayBuffer(),
          () => undefined,
        );
        health.push({ at: t, ms: performance.now() - t });
        await sleep(1000);
      }
    })();
    let next = 0;
    const client = async () => {
      for (let i = next++; i < args.requests; i = next++) {
        const t = performance.now();
        // The offsite request asks a person to approve the invitations: the client approves, as a
        // person would, and the request runs on to its end.
        const status = await settle(url, auth, await post(url, auth, offsiteText(i)));
        done.push({ index: i, startedAt: t, endedAt: performance.now(), status });
        if (done.length % 1000 === 0) process.stderr.write(`  ${done.length} requests settled\n`);
      }
    };
    await Promise.all(Array.from({ length: args.concurrency }, client))
      .catch((e: unknown) => {
        throw new Error(
          `after ${done.length} requests: ${String(e)}; the server ${server.exitCode === null ? "runs" : `exited (${server.exitCode ?? server.signalCode})`}; its stderr ends:\n${log()}`,
        );
      })
      .finally(() => {
        stop = true;
      });
    await prober;
    const wallMs = performance.now() - started;
    const peakRssMb = (await vm(pid, "VmHWM")) / 1024;
    const rssEndMb = (await vm(pid, "VmRSS")) / 1024;
    await sleep(10_000);
    const rssIdleMb = (await vm(pid, "VmRSS")) / 1024;

    const window = Math.min(1000, Math.floor(done.length / 2));
    const byEnd = [...done].sort((a, b) => a.endedAt - b.endedAt);
    const slice = (part: Done[], from: number) => {
      const ms = part.map((d) => d.endedAt - d.startedAt).sort((a, b) => a - b);
      const span = (part.at(-1)?.endedAt ?? 0) - from;
      const healthMax = Math.max(
        0,
        ...health.filter((h) => h.at >= from && h.at <= (part.at(-1)?.endedAt ?? 0)).map((h) => h.ms),
      );
      return {
        requestsPerSecond: (part.length / span) * 1000,
        p50Ms: pct(ms, 0.5),
        p99Ms: pct(ms, 0.99),
        healthzMaxMs: healthMax,
      };
    };
    const first = slice(byEnd.slice(0, window), started);
    const last = slice(byEnd.slice(-window), byEnd[byEnd.length - window - 1]?.endedAt ?? started);
    const statuses = Object.entries(
      done.reduce<Record<string, number>>((m, d) => {
        m[d.status] = (m[d.status] ?? 0) + 1;
        return m;
      }, {}),
    )
      .map(([s, n]) => `${s} ${n}`)
      .join(", ");
    const f = (n: number, d = 1) => n.toFixed(d);
    out(`settled: ${statuses}; total ${f(wallMs / 1000)} s, ${f((done.length / wallMs) * 1000)} requests/s`);
    for (const [name, s] of [
      [`first ${window}`, first],
      [`last ${window}`, last],
    ] as const)
      out(
        `  ${name.padEnd(11)} ${f(s.requestsPerSecond)} requests/s, p50 ${f(s.p50Ms, 0)} ms, p99 ${f(s.p99Ms, 0)} ms, ` +
          `slowest /healthz ${f(s.healthzMaxMs, 0)} ms`,
      );
    const ratio = last.requestsPerSecond / first.requestsPerSecond;
    out(
      `  last/first throughput ${f(ratio, 2)} (${ratio >= 0.8 ? "within" : "NOT within"} 20%); ` +
        `server RSS: peak ${f(peakRssMb, 0)} MB, ${f(rssEndMb, 0)} MB at the end, ${f(rssIdleMb, 0)} MB after 10 s idle`,
    );
    out(`1-minute load average: ${f(loadAtStart, 2)} at the start, ${f(loadavg()[0] ?? 0, 2)} at the end.`);
    const file = join(tmpdir(), "arbor-bench-sustained.json");
    await writeFile(
      file,
      `${JSON.stringify({ at: new Date().toISOString(), args, wallMs, first, last, peakRssMb, rssEndMb, rssIdleMb, statuses }, null, 2)}\n`,
    );
    out(`Numbers as JSON: ${file}`);
  } finally {
    await served?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
