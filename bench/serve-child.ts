import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

/**
 * A real `arbor serve --example offsite --port 0` as a child process, for the benches that load it
 * over HTTP (bench/sustained.ts, bench/burst.ts), and the client that drives one request to its end
 * as a person would: post it, poll its root task, approve the invitations when asked.
 *
 * The rate limits are off (`ARBOR_RATE_LIMIT_PER_KEY` / `_PER_TENANT`): a load test must not be
 * throttled. ARBOR_BENCH_SERVER_NODE_OPTIONS becomes the server's NODE_OPTIONS, and
 * ARBOR_BENCH_SERVER_STDERR names a file that receives the server's whole stderr and stdout (its logs; the bench itself
 * keeps only its last 4,000 characters).
 */
const BIN = join(import.meta.dirname, "../cli/bin.mjs");
export const SETTLED = new Set(["done", "failed", "canceled"]);
/** No request may take longer than this. */
export const REQUEST_TIMEOUT_MS = 120_000;

export interface BenchEnv {
  env: NodeJS.ProcessEnv;
  dataDir: string;
  /** The bearer key's headers for every call. */
  auth: Record<string, string>;
}

/**
 * The environment of a server on `dir` (its data folder and keys file inside), and a key for it:
 * a new key, or with `existing` the key an earlier bench added there (kept in `dir`/bench-key).
 */
export async function benchEnv(dir: string, options: { existing?: boolean } = {}): Promise<BenchEnv> {
  const dataDir = join(dir, "data");
  const env = {
    ...process.env,
    ARBOR_DATA_DIR: dataDir,
    ARBOR_API_KEYS_FILE: join(dir, "keys.json"),
    ARBOR_MODEL_PROVIDER: "",
    NO_COLOR: "1",
    ARBOR_RATE_LIMIT_PER_KEY: "off",
    ARBOR_RATE_LIMIT_PER_TENANT: "off",
  };
  const keyFile = join(dir, "bench-key");
  if (options.existing) {
    const key = (await readFile(keyFile, "utf8")).trim();
    return { env, dataDir, auth: { authorization: `Bearer ${key}`, "content-type": "application/json" } };
  }
  const added = await promisify(execFile)(
    process.execPath,
    [BIN, "keys", "add", "--id", "user_bench", "--tenant", "bench", "--role", "admin"],
    { env },
  );
  const key = /^ {2}(arbor_\S+)$/m.exec(added.stdout)?.[1];
  if (!key) throw new Error(`arbor keys add printed no key: ${added.stdout}`);
  await writeFile(keyFile, `${key}\n`, { mode: 0o600 });
  return { env, dataDir, auth: { authorization: `Bearer ${key}`, "content-type": "application/json" } };
}

export interface Served {
  url: string;
  pid: number;
  child: ChildProcess;
  /** The last 4,000 characters of its stderr. */
  log(): string;
  /** SIGTERM, then SIGKILL after 30 s. */
  stop(): Promise<void>;
}

/** Starts `arbor serve --example offsite --port 0`; `nodeOptions` are added to the server's NODE_OPTIONS. */
export async function startServe(b: BenchEnv, nodeOptions: readonly string[] = []): Promise<Served> {
  const options = [process.env.ARBOR_BENCH_SERVER_NODE_OPTIONS ?? "", ...nodeOptions].join(" ").trim();
  const child = spawn(process.execPath, [BIN, "serve", "--example", "offsite", "--port", "0"], {
    env: options ? { ...b.env, NODE_OPTIONS: options } : b.env,
  });
  let log = "";
  const stderrFile = process.env.ARBOR_BENCH_SERVER_STDERR;
  const stderrCopy = stderrFile ? createWriteStream(stderrFile, { flags: "a" }) : undefined;
  child.stderr?.on("data", (d) => {
    log = (log + d).slice(-4000);
    stderrCopy?.write(d);
  });
  const url = await new Promise<string>((ok, fail) => {
    let text = "";
    child.stdout?.on("data", (d) => {
      stderrCopy?.write(d); // its structured logs go to stdout
      text += d;
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(text);
      if (m) ok(m[1] as string);
    });
    child.on("exit", () => fail(new Error(`arbor serve exited: ${text}${log}`)));
  });
  return {
    url,
    pid: child.pid as number,
    child,
    log: () => log,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.on("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(30_000)]);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

/**
 * fetch, tried again (up to 3 times, 1 s apart) when the connection failed before an answer: a
 * kept-alive socket the server closed as it was reused, or a server paused for seconds (a heap
 * snapshot). Only for calls that may be repeated: reads, and answers (a repeated one is a 409).
 */
async function fetchAgain(input: string, init?: RequestInit): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetch(input, init);
    } catch (error) {
      if (attempt >= 3 || !(error instanceof TypeError)) throw error;
      await sleep(1000);
    }
  }
}

/**
 * Posts one request, as the measurements did (no Idempotency-Key, so never tried again);
 * resolves with its root task once the server answered 202.
 */
export async function post(url: string, auth: Record<string, string>, text: string): Promise<string> {
  const res = await fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ text }),
  }).catch((error: unknown) => {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new Error(`POST /v1/messages: ${String(error)} (${cause?.code ?? ""} ${cause?.message ?? ""})`, {
      cause: error,
    });
  });
  const body = (await res.json()) as { rootTaskId?: string };
  if (res.status !== 202 || !body.rootTaskId) throw new Error(`POST /v1/messages: ${res.status}`);
  return body.rootTaskId;
}

/**
 * Polls a request's root task until it ends, approving the invitations when asked (the offsite
 * request asks a person to); resolves with its last status.
 */
export async function settle(url: string, auth: Record<string, string>, rootTaskId: string): Promise<string> {
  const started = performance.now();
  const task = `${url}/v1/tasks/${encodeURIComponent(rootTaskId)}`;
  let status = "";
  for (let wait = 20; !SETTLED.has(status); wait = Math.min(200, wait * 2)) {
    if (performance.now() - started > REQUEST_TIMEOUT_MS)
      throw new Error(`${rootTaskId} did not end: ${status}`);
    await sleep(wait);
    const view = (await (await fetchAgain(task, { headers: auth })).json()) as { task?: { status?: string } };
    status = view.task?.status ?? "";
    if (SETTLED.has(status)) break;
    const asked = (await (await fetchAgain(`${task}/interactions`, { headers: auth })).json()) as {
      interactions?: { urn: string }[];
    };
    for (const { urn } of asked.interactions ?? []) {
      const answered = await fetchAgain(`${url}/v1/interactions/${encodeURIComponent(urn)}/answer`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ selectedOptionId: "approve" }),
      });
      await answered.arrayBuffer();
      if (answered.status !== 204 && answered.status !== 409)
        throw new Error(`answering ${urn}: ${answered.status}`);
    }
  }
  return status;
}

export const offsiteText = (i: number) =>
  `Plan a two-day team offsite in Lisbon for 12 people (request ${i})`;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const pct = (sorted: readonly number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;

/** A size in kB from /proc/<pid>/status (Linux). */
export async function vm(pid: number, field: "VmHWM" | "VmRSS"): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? Number.NaN);
}

/** The process's CPU time so far, user + system, all threads, in ms (/proc/<pid>/stat, Linux). */
export async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start at ") ".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/**
 * The CPU time of each of a process's threads so far, user + system, in ms, summed by thread name
 * (/proc/<pid>/task/<tid>/comm, Linux): `MainThread` (the event loop), `V8Worker` (the garbage
 * collector's and compiler's helpers), `libuv-worker` (fsync and file calls), a worker thread's own
 * name (the WAL checkpointer). A thread that ended meanwhile is no longer counted.
 */
export async function threadCpuMs(pid: number): Promise<Map<string, number>> {
  const byName = new Map<string, number>();
  for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    try {
      const [comm, stat] = await Promise.all([
        readFile(`/proc/${pid}/task/${tid}/comm`, "utf8"),
        readFile(`/proc/${pid}/task/${tid}/stat`, "utf8"),
      ]);
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const ms = ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
      const name = comm.trim();
      byName.set(name, (byName.get(name) ?? 0) + ms);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return byName;
}

/** The bytes of the files in a folder and its subfolders. */
export async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  return total;
}
