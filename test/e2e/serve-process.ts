import { type ChildProcessWithoutNullStreams, execFile, spawn } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";

/**
 * `arbor` as real child processes (node cli/bin.mjs), for the tests that kill, restart or
 * race them, or need the command itself (its flags, its settings, files it watches while it runs): a
 * command run to its end, and `arbor serve` started and waited for until it listens.
 */
export const BIN = join(import.meta.dirname, "../../cli/bin.mjs");

/** The environment of a child: the test's own, one data folder, no model unless `extra` sets one. */
export const arborEnv = (dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  ARBOR_DATA_DIR: dataDir,
  ARBOR_MODEL_PROVIDER: "",
  NO_COLOR: "1",
  ...extra,
});

export interface Finished {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `arbor <args>` to its end. */
export function arborCli(args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<Finished> {
  return new Promise((resolve) => {
    const options = { env, timeout: 60_000, killSignal: "SIGKILL" as const }; // a command that never ends fails
    const child = execFile(process.execPath, [BIN, ...args], options, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(input ?? "");
  });
}

/** A new API key (`arbor keys add`), printed once: returned. */
export async function addKey(env: NodeJS.ProcessEnv, id: string, tenant = "acme"): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [BIN, "keys", "add", "--id", id, "--tenant", tenant],
    { env },
  );
  const key = /^ {2}(arbor_\S+)$/m.exec(stdout)?.[1];
  if (!key) throw new Error(`arbor keys add printed no key: ${stdout}`);
  return key;
}

export interface Served {
  url: string;
  child: ChildProcessWithoutNullStreams;
  /** The exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** What it printed so far (stdout and stderr: the structured log is on stdout). */
  output(): string;
  /** SIGTERM (SIGKILL after 10 s), and resolves once the process is gone. */
  stop(): Promise<void>;
}

/** Starts `arbor serve --port 0 <args>` and resolves once it listens (rejects if it exits first). */
export async function startServe(env: NodeJS.ProcessEnv, args: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0", ...args], { env });
  let out = "";
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const look = (d: Buffer) => {
      out += d;
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1] as string);
    };
    child.stdout.on("data", look);
    child.stderr.on("data", look);
    void exited.then((code) => reject(new Error(`arbor serve exited (${code}) before it listened:\n${out}`)));
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000).then(() => child.kill("SIGKILL"))]);
  };
  return { url, child, exited, output: () => out, stop };
}

/** SIGKILL, and resolves once the process is gone. */
export async function killHard(served: Served): Promise<void> {
  served.child.kill("SIGKILL");
  await served.exited;
}

/** A GET with whatever Host header it is given (fetch does not let a caller set one). */
export function getWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "GET", headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Polls `probe` until `done` holds for its result (or `timeoutMs` passes: then the last result). */
export async function eventually<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value) || Date.now() > deadline) return value;
    await sleep(100);
  }
}
