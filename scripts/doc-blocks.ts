/**
 * Runs the docs' command blocks marked runnable, as a newcomer would type them into one terminal:
 *
 *   node scripts/doc-blocks.ts                 # README.md and docs/*.md
 *   node scripts/doc-blocks.ts docs/tools.md   # some docs only
 *   node scripts/doc-blocks.ts --list          # the runnable blocks, without running them
 *   node scripts/doc-blocks.ts --keep          # keeps each document's data folder (and prints where)
 *
 * A block is runnable when the line just before its fence (```sh or ```bash) is the comment
 *
 *   <!-- runnable -->
 *   <!-- runnable: answers y -->          what the person types at the terminal's prompts, a line each
 *   <!-- runnable: timeout 300 -->        seconds before the block counts as hung (default 120)
 *
 * (options joined with commas). Mark only blocks that run offline, with nothing but a clone: no
 * AWS account, no Slack, no real model (the local runtime's example plays the model).
 *
 * Each document gets one bash session (`set -Eeo pipefail`), started from the root of the checkout,
 * so a block sees the variables, functions and background jobs of the blocks above it; its own
 * fresh data folder (ARBOR_DATA_DIR in a new temporary folder; no other ARBOR_* setting of the
 * caller's environment); and on the PATH, `arbor` (cli/bin.mjs) and an `npm` that takes `npm ci`
 * and `npm install` as done when node_modules is there (the checkout it runs in is installed, and
 * installing again would pull the modules from under the running suite). Blocks run in order, each
 * printed with what it printed. The first that fails (a command that exits non-zero, or the block
 * still running after its timeout) stops the run with its document and line, exit code 1. At the
 * end of each document, everything the session started (a server a block sent to the background)
 * is stopped: SIGTERM to its process group, SIGKILL 5 s later; and at once (SIGKILL) when the run
 * itself is stopped (SIGINT, SIGTERM, SIGHUP). A document whose blocks reach a local port
 * (`127.0.0.1:8787`) fails before it runs when something listens there already.
 *
 * test/unit/house/doc-blocks.test.ts runs it in the suite.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join, relative, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const ROOT = join(import.meta.dirname, "..");
const DEFAULT_TIMEOUT_S = 120;
const MARKER = /^<!--\s*runnable(?::\s*(.*?))?\s*-->\s*$/;
const FENCE = /^```(sh|bash)\s*$/;

interface Block {
  /** The document, as given (relative to the checkout when it is in it). */
  doc: string;
  /** The line of the opening fence (1-based). */
  line: number;
  code: string;
  answers: string[];
  timeoutS: number;
}

/** The runnable blocks of one document; throws on a marker that is not right before a sh/bash fence. */
function runnableBlocks(doc: string, text: string): Block[] {
  const lines = text.split("\n");
  const blocks: Block[] = [];
  lines.forEach((line, i) => {
    const marker = MARKER.exec(line);
    if (!marker) return;
    const where = `${doc}:${i + 1}`;
    if (!FENCE.test(lines[i + 1] ?? ""))
      throw new Error(
        `${where}: a runnable marker must be the line just before a \`\`\`sh or \`\`\`bash fence`,
      );
    const end = lines.findIndex((l, j) => j > i + 1 && /^```\s*$/.test(l));
    if (end < 0) throw new Error(`${where}: the block is never closed`);
    const block: Block = {
      doc,
      line: i + 2,
      code: `${lines.slice(i + 2, end).join("\n")}\n`,
      answers: [],
      timeoutS: DEFAULT_TIMEOUT_S,
    };
    for (const option of (marker[1] ?? "").split(",").map((o) => o.trim())) {
      const [name, ...words] = option.split(/\s+/);
      if (!name) continue;
      if (name === "answers" && words.length > 0) block.answers = words;
      else if (name === "timeout" && /^\d+$/.test(words[0] ?? "") && words.length === 1)
        block.timeoutS = Number(words[0]);
      else throw new Error(`${where}: unknown option "${option}" (answers <line>..., timeout <seconds>)`);
    }
    blocks.push(block);
  });
  return blocks;
}

/** The first `npm` on the PATH. */
function realNpm(path: string): string {
  for (const dir of path.split(delimiter)) {
    const npm = join(dir, "npm");
    try {
      accessSync(npm, constants.X_OK);
      return npm;
    } catch {}
  }
  throw new Error("npm is not on the PATH");
}

/** The session's bin folder: `arbor`, and `npm` that takes an install of the checkout as done. */
async function binFolder(dir: string): Promise<string> {
  const bin = join(dir, "bin");
  await mkdir(bin);
  const q = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
  const scripts = {
    arbor: `#!/bin/sh\nexec ${q(process.execPath)} ${q(join(ROOT, "cli/bin.mjs"))} "$@"\n`,
    npm:
      `#!/bin/sh\ncase "$1" in\n  ci|install|i)\n    if [ -d node_modules ]; then\n` +
      `      echo "doc-blocks: node_modules is installed: npm $* taken as done"; exit 0\n    fi;;\nesac\n` +
      `exec ${q(realNpm(process.env.PATH ?? ""))} "$@"\n`,
  };
  for (const [name, text] of Object.entries(scripts)) {
    await writeFile(join(bin, name), text);
    await chmod(join(bin, name), 0o755);
  }
  return bin;
}

// Where a command failed (its line in the block), on the control descriptor, fd 3.
const PRELUDE = `set -Eeo pipefail
__fail() { printf 'fail %d %d %s\\n' "$1" "$2" "\${BASH_COMMAND//$'\\n'/ }" >&3; }
trap '__fail $? $LINENO' ERR
`;

type Outcome = { ok: true } | { ok: false; why: string };

/** A bash session for one document, in its own process group. */
class Session {
  readonly child: ChildProcess;
  #control = "";
  #waiters: (() => void)[] = [];
  exited: Promise<number | null>;

  constructor(env: NodeJS.ProcessEnv, print: (text: string) => void) {
    this.child = spawn("bash", ["--noprofile", "--norc", "-s"], {
      cwd: ROOT,
      env,
      detached: true, // its own process group: what it starts is stopped with it
      stdio: ["pipe", "pipe", "pipe", "pipe"],
    });
    for (const stream of [this.child.stdout, this.child.stderr])
      stream?.on("data", (d: Buffer) => print(d.toString()));
    (this.child.stdio[3] as NodeJS.ReadableStream).on("data", (d: Buffer) => {
      this.#control += d.toString();
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.exited = new Promise((done) => this.child.on("exit", (code) => done(code)));
    void this.exited.then(() => {
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.child.stdin?.on("error", () => {}); // a shell that ended reads nothing more: its exit says why
    this.child.stdin?.write(PRELUDE);
  }

  /** Runs one block (its text in `file`, its answers in `input`), to its end or its timeout. */
  async run(n: number, file: string, input: string, timeoutS: number): Promise<Outcome & { at?: number }> {
    this.#control = "";
    this.child.stdin?.write(`source '${file}' < '${input}'\nprintf 'done %d\\n' ${n} >&3\n`);
    const deadline = Date.now() + timeoutS * 1000;
    let ended = false;
    void this.exited.then(() => {
      ended = true;
    });
    while (!this.#control.includes(`done ${n}\n`)) {
      if (ended) {
        const code = await this.exited;
        const fail = [...this.#control.matchAll(/^fail (\d+) (\d+) (.*)$/gm)].at(-1);
        return fail
          ? { ok: false, why: `exit ${fail[1]}: ${fail[3]}`, at: Number(fail[2]) }
          : { ok: false, why: `the shell ended (exit ${code})` };
      }
      const left = deadline - Date.now();
      if (left <= 0) return { ok: false, why: `still running after ${timeoutS} s` };
      await Promise.race([
        new Promise<void>((wake) => this.#waiters.push(wake)),
        sleep(Math.min(left, 1000)),
      ]);
    }
    return { ok: true };
  }

  /** Ends the session and everything it started. */
  async stop(): Promise<void> {
    this.child.stdin?.end("exit 0\n");
    await Promise.race([this.exited, sleep(2000)]);
    const group = this.child.pid as number;
    const alive = () => {
      try {
        process.kill(-group, 0);
        return true;
      } catch {
        return false;
      }
    };
    if (!alive()) return;
    process.kill(-group, "SIGTERM");
    for (let i = 0; i < 50 && alive(); i++) await sleep(100);
    if (alive()) process.kill(-group, "SIGKILL");
  }
}

/**
 * The session running now and its folder: stopped and removed with the runner when it is stopped
 * itself (a test's timeout, Ctrl-C, the terminal closed), so no server a block started keeps its port.
 */
let current: { session: Session; dir: string; keep: boolean } | undefined;
const SIGNAL_CODES = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;
for (const signal of Object.keys(SIGNAL_CODES) as (keyof typeof SIGNAL_CODES)[])
  process.once(signal, () => {
    if (current?.session.child.pid)
      try {
        process.kill(-current.session.child.pid, "SIGKILL");
      } catch {}
    if (current && !current.keep) rmSync(current.dir, { recursive: true, force: true });
    process.exit(SIGNAL_CODES[signal]);
  });

/** The local ports a document's blocks reach (`127.0.0.1:8787`, `localhost:8787`): their servers' own. */
const portsOf = (blocks: readonly Block[]): number[] => [
  ...new Set(
    blocks.flatMap((b) =>
      [...b.code.matchAll(/\b(?:127\.0\.0\.1|localhost):(\d{1,5})\b/g)].map((m) => Number(m[1])),
    ),
  ),
];

/** Whether something on this machine listens on 127.0.0.1:`port` already. */
function taken(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once("error", (error: NodeJS.ErrnoException) => done(error.code === "EADDRINUSE"));
    server.listen(port, "127.0.0.1", () => server.close(() => done(false)));
  });
}

const say = (text: string) => process.stdout.write(text);
// A reader that went away (`| head`) ends the output, not the run's cleanup.
process.stdout.on("error", () => {});

/** What a session prints, line by line under its block; `flush` ends a line left open. */
function lineWriter(): { write(text: string): void; flush(): void } {
  let open = "";
  return {
    write(text) {
      const lines = (open + text).split("\n");
      open = lines.pop() ?? "";
      for (const line of lines) say(`  │ ${line}\n`);
    },
    flush() {
      if (open) say(`  │ ${open}\n`);
      open = "";
    },
  };
}

/** Runs one document's blocks; the first failure as "doc:line: why", else undefined. */
async function runDocument(doc: string, blocks: Block[], keep: boolean): Promise<string | undefined> {
  // A block that starts a server on a port something else holds would fail later, far from why
  // (the other server answers the blocks' requests): say it before anything runs.
  for (const port of portsOf(blocks))
    if (await taken(port)) {
      const failure = `${doc}: port ${port} on 127.0.0.1 is taken, and its blocks start a server there: stop what listens on it (an arbor serve left running?) and run again`;
      say(`\n✗ ${failure}\n`);
      return failure;
    }
  const dir = mkdtempSync(join(tmpdir(), "arbor-doc-blocks-"));
  const bin = await binFolder(dir);
  const env: NodeJS.ProcessEnv = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.startsWith("ARBOR_")),
  );
  Object.assign(env, {
    ARBOR_DATA_DIR: join(dir, "data"),
    PATH: `${bin}${delimiter}${process.env.PATH ?? ""}`,
    NO_COLOR: "1",
  });
  say(
    `\n${doc}: ${blocks.length} runnable block${blocks.length === 1 ? "" : "s"}, data folder ${env.ARBOR_DATA_DIR}\n`,
  );
  const out = lineWriter();
  const session = new Session(env, (text) => out.write(text));
  current = { session, dir, keep };
  let failure: string | undefined;
  try {
    for (const [n, block] of blocks.entries()) {
      const file = join(dir, `block-${n}.sh`);
      const input = join(dir, `block-${n}.in`);
      await writeFile(file, block.code);
      await writeFile(input, block.answers.map((a) => `${a}\n`).join(""));
      say(
        `\n── ${doc}:${block.line}${block.answers.length ? ` (answers: ${block.answers.join(" ")})` : ""}\n`,
      );
      say(block.code.replace(/^(?=.)/gm, "$ "));
      const started = Date.now();
      const outcome = await session.run(n, file, input, block.timeoutS);
      const took = `${((Date.now() - started) / 1000).toFixed(1)} s`;
      out.flush();
      if (outcome.ok) {
        say(`✓ ${doc}:${block.line} (${took})\n`);
        continue;
      }
      const line = block.line + (outcome.at ?? 1);
      failure = `${doc}:${line}: ${outcome.why} (the block at line ${block.line}, after ${took})`;
      say(`✗ ${failure}\n`);
      break;
    }
  } finally {
    await session.stop();
    out.flush();
    current = undefined;
    if (keep) say(`The data folder is kept: ${env.ARBOR_DATA_DIR}\n`);
    else rmSync(dir, { recursive: true, force: true });
  }
  return failure;
}

async function main(args: string[]): Promise<number> {
  const list = args.includes("--list");
  const keep = args.includes("--keep");
  const named = args.filter((a) => !a.startsWith("--"));
  const docs = named.length
    ? named.map((d) => {
        const inside = relative(ROOT, resolve(d));
        return inside.startsWith("..") ? resolve(d) : inside;
      })
    : [
        "README.md",
        ...readdirSync(join(ROOT, "docs"))
          .filter((f) => f.endsWith(".md"))
          .sort()
          .map((f) => `docs/${f}`),
      ];
  const found = docs.map((doc) => {
    const path = resolve(ROOT, doc);
    if (!existsSync(path)) throw new Error(`${doc}: no such file`);
    return { doc, blocks: runnableBlocks(doc, readFileSync(path, "utf8")) };
  });
  const withBlocks = found.filter((f) => f.blocks.length > 0);
  const total = withBlocks.reduce((n, f) => n + f.blocks.length, 0);
  if (list) {
    for (const { blocks } of withBlocks) for (const b of blocks) say(`${b.doc}:${b.line}\n${b.code}\n`);
    return 0;
  }
  const started = Date.now();
  for (const { doc, blocks } of withBlocks) {
    const failure = await runDocument(doc, blocks, keep);
    if (failure) {
      say(`\ndoc blocks: failed at ${failure}\n`);
      return 1;
    }
  }
  say(
    `\ndoc blocks: ${total} block${total === 1 ? "" : "s"} in ${withBlocks.length} document${withBlocks.length === 1 ? "" : "s"} ran (${((Date.now() - started) / 1000).toFixed(0)} s)\n`,
  );
  return 0;
}

process.exitCode = await main(process.argv.slice(2)).catch((error: Error) => {
  process.stderr.write(`doc-blocks: ${error.message}\n`);
  return 2;
});
