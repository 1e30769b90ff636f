import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { request } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * `arbor serve --example offsite` as a real child process, with a stop that waits for it, for the tests that need
 * the command itself: its flags, its settings, and files it watches while it runs.
 */
const BIN = join(import.meta.dirname, "../../shared/cli/bin.mjs");

export interface ServeProcess {
  url: string;
  /** Everything it printed so far (stdout and stderr: the structured log is on stdout). */
  output(): string;
  stop(): Promise<void>;
}

export async function startServe(args: string[], env: Record<string, string>): Promise<ServeProcess> {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    [BIN, "serve", "--example", "offsite", "--port", "0", ...args],
    { env: { ...process.env, ARBOR_MODEL_PROVIDER: "", NO_COLOR: "1", ...env } },
  );
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  child.stderr.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const look = () => {
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1] as string);
    };
    child.stdout.on("data", look);
    child.on("exit", (code) => reject(new Error(`arbor serve exited (${code}): ${out}`)));
  });
  return {
    url,
    output: () => out,
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await Promise.race([exited, sleep(10_000).then(() => child.kill("SIGKILL"))]);
    },
  };
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
