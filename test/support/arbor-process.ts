import { type ChildProcessWithoutNullStreams, execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { keysCommand } from "../../cli/lib/keys.ts";

/**
 * Arbor as real child processes (node cli/bin.mjs), for the tests in test/process/: a command run
 * to its end, and `arbor serve` started, waited for until it listens, and killed. Every child runs
 * from the checkout, as a person runs `npx arbor` there.
 */
const ROOT = join(import.meta.dirname, "../..");
export const BIN = join(ROOT, "cli/bin.mjs");

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

/**
 * Runs `node <args>` to its end: `input` on its stdin, then end of input. Killed (SIGKILL) after
 * 60 s, so a command that never ends fails instead of hanging the file.
 */
export function node(args: string[], env: NodeJS.ProcessEnv = process.env, input = ""): Promise<Finished> {
  return new Promise((resolve) => {
    const options = { env, cwd: ROOT, timeout: 60_000, killSignal: "SIGKILL" as const, maxBuffer: 2 ** 26 };
    const child = execFile(process.execPath, args, options, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin?.end(input);
  });
}

/** Runs `arbor <args>` to its end (see `node`). */
export function arborCli(args: string[], env: NodeJS.ProcessEnv, input?: string): Promise<Finished> {
  return node([BIN, ...args], env, input);
}

/** The key `arbor keys add` printed (it prints it once), or an error saying what it printed instead. */
export function keyIn(stdout: string): string {
  const key = /^ {2}(arbor_\S+)$/m.exec(stdout)?.[1];
  if (!key) throw new Error(`arbor keys add printed no key: ${stdout}`);
  return key;
}

/**
 * A new API key of `tenant` with `roles`, returned: what `arbor keys add` does on `env`, by the
 * command's own code run in this process (a child would add only its start-up, about a second of
 * CPU; keys-cli.test.ts runs the command itself).
 */
export async function addKey(
  env: NodeJS.ProcessEnv,
  id: string,
  tenant = "acme",
  roles: string[] = [],
): Promise<string> {
  const printed: string[] = [];
  const options = { id, kind: undefined, tenant, roles };
  await keysCommand("add", undefined, options, (line) => printed.push(line), env);
  return keyIn(printed.join("\n"));
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

/** Every `arbor serve` started here and not yet gone, with its exit: `killAll` ends them. */
const running = new Map<ChildProcessWithoutNullStreams, Promise<number | null>>();

/**
 * Starts `arbor serve --port 0 <args>` and resolves once it listens (rejects if it exits first).
 * A file that starts one ends with `afterAll(killAll)`.
 */
export async function startServe(env: NodeJS.ProcessEnv, args: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0", ...args], { env, cwd: ROOT });
  let out = "";
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  running.set(child, exited);
  void exited.then(() => running.delete(child));
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

/** Kills (SIGKILL) every `arbor serve` still running, and resolves once they are gone: a file's afterAll. */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...running].map(([child, exited]) => {
      child.kill("SIGKILL");
      return exited;
    }),
  );
}
