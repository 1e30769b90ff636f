import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";

/**
 * scripts/doc-blocks.ts as it is run by people and by CI: stopped from outside mid-run (the
 * terminal closed: SIGHUP; Ctrl-C; a timeout's SIGTERM), it leaves nothing a block started
 * running (a server would keep port 8787 and fail the next run); and run while the port its blocks
 * start a server on is taken, it says so before anything runs, rather than failing later at a
 * request the other server answered.
 */
const ROOT = join(import.meta.dirname, "../..");
const SCRIPT = join(ROOT, "scripts/doc-blocks.ts");
const scratch = mkdtempSync(join(tmpdir(), "arbor-attack-doc-blocks-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Running, and not a zombie waiting for its parent to reap it (SIGKILL-ed processes are that a moment). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function start(doc: string) {
  const child = spawn(process.execPath, [SCRIPT, doc], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream.on("data", (d: Buffer) => (output += d));
  const exited = new Promise<number | null>((done) =>
    child.once("exit", (code, signal) => done(code ?? (signal ? -1 : null))),
  );
  return { child, exited, output: () => output };
}

describe("scripts/doc-blocks.ts stopped from outside, or with its port taken", () => {
  for (const signal of ["SIGHUP", "SIGINT", "SIGTERM"] as const)
    it(`stops what the blocks started when it gets ${signal}`, async () => {
      const pidFile = join(scratch, `${signal}.pid`);
      const doc = join(scratch, `${signal}.md`);
      writeFileSync(
        doc,
        [
          "<!-- runnable -->",
          "```sh",
          `sleep 300 & echo $! > '${pidFile}'`,
          "```",
          "",
          "<!-- runnable -->",
          "```sh",
          "sleep 120",
          "```",
          "",
        ].join("\n"),
      );
      const run = start(doc);
      // The shell makes the file, then writes the pid into it: wait for the pid, not the file.
      const pid = () => (existsSync(pidFile) ? Number(readFileSync(pidFile, "utf8").trim()) : 0);
      for (let i = 0; i < 400 && !(pid() > 0); i++) await sleep(50);
      const background = pid();
      expect(background, run.output()).toBeGreaterThan(0);
      expect(running(background)).toBe(true);
      await sleep(300); // the second block is running
      run.child.kill(signal);
      await run.exited;
      for (let i = 0; i < 40 && running(background); i++) await sleep(50);
      expect(running(background), run.output()).toBe(false);
    }, 60_000);

  it("fails at once, naming the port, when the port its blocks start a server on is taken", async () => {
    const server: Server = createServer((socket) => socket.end("HTTP/1.1 404 Not Found\r\n\r\nnot here"));
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    const { port } = server.address() as { port: number };
    try {
      const doc = join(scratch, "taken.md");
      writeFileSync(
        doc,
        [
          "<!-- runnable -->",
          "```sh",
          `python3 -m http.server ${port} --bind 127.0.0.1 &`,
          `curl -s --retry 10 --retry-connrefused --retry-delay 1 http://127.0.0.1:${port}/`,
          "```",
          "",
        ].join("\n"),
      );
      const run = start(doc);
      expect(await run.exited).toBe(1);
      expect(run.output()).toContain(`port ${port} on 127.0.0.1 is taken`);
      expect(run.output()).not.toContain("$ python3"); // nothing ran
    } finally {
      server.close();
    }
  }, 60_000);
});
