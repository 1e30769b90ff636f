import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

/**
 * The docs' runnable blocks (scripts/doc-blocks.ts) run as written: README.md's and the guides'
 * blocks marked `<!-- runnable -->`, each document in one bash session with a fresh data folder,
 * offline (the example's scripted model). A documented command that no longer works fails here
 * with its document and line. And the runner itself: a failing block is reported at its line,
 * a hung one at its timeout, and what a block started in the background is stopped.
 */
const ROOT = join(import.meta.dirname, "../../..");
const SCRIPT = join(ROOT, "scripts/doc-blocks.ts");

function runner(args: string[], timeout: number): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SCRIPT, ...args],
      { cwd: ROOT, timeout, killSignal: "SIGTERM", maxBuffer: 64 * 2 ** 20 },
      (error, stdout, stderr) =>
        resolve({
          code: error ? Number((error as { code?: number }).code ?? 1) : 0,
          output: stdout + stderr,
        }),
    );
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("the docs' runnable blocks", () => {
  const scratch = mkdtempSync(join(tmpdir(), "arbor-doc-blocks-test-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it("stop at the first block that fails, with its document and line, and stop what they started", async () => {
    const doc = join(scratch, "failing.md");
    const pidFile = join(scratch, "sleep.pid");
    writeFileSync(
      doc,
      [
        "# A guide", // 1
        "", // 2
        "<!-- runnable -->", // 3
        "```sh", // 4
        "GREETING=hello", // 5
        `sleep 300 & echo $! > '${pidFile}'`, // 6
        "```", // 7
        "", // 8
        "<!-- runnable: answers yes -->", // 9
        "```bash", // 10
        'read answer; echo "$GREETING, $answer"', // 11
        "test -e /nonexistent/file", // 12
        "echo never", // 13
        "```", // 14
        "", // 15
        "<!-- runnable -->", // 16
        "```sh", // 17
        "echo not reached", // 18
        "```", // 19
      ].join("\n"),
    );
    const { code, output } = await runner([doc], 60_000);
    expect(code, output).toBe(1);
    expect(output).toContain("  │ hello, yes");
    expect(output).toContain(`doc blocks: failed at ${doc}:12: exit 1: test -e /nonexistent/file`);
    expect(output).not.toContain("│ never");
    expect(output).not.toContain("not reached");
    expect(alive(Number(readFileSync(pidFile, "utf8"))), "the background sleep is stopped").toBe(false);
  });

  it("fail a block still running after its timeout", async () => {
    const doc = join(scratch, "hung.md");
    writeFileSync(doc, ["<!-- runnable: timeout 1 -->", "```sh", "sleep 30", "```", ""].join("\n"));
    const { code, output } = await runner([doc], 60_000);
    expect(code, output).toBe(1);
    expect(output).toContain(`doc blocks: failed at ${doc}:3: still running after 1 s`);
  });

  it("refuse a marker that is not right before a sh or bash block", async () => {
    const doc = join(scratch, "misplaced.md");
    writeFileSync(doc, ["<!-- runnable -->", "", "```sh", "true", "```", ""].join("\n"));
    const { code, output } = await runner([doc], 60_000);
    expect(code, output).toBe(2);
    expect(output).toContain(`${doc}:1: a runnable marker must be the line just before`);
  });

  it("of README.md and docs/ run as written", { timeout: 600_000 }, async () => {
    const { code, output } = await runner([], 580_000);
    expect(code, output).toBe(0);
    expect(output).toMatch(/✓ README\.md:\d+/);
    expect(output).toMatch(/doc blocks: \d+ blocks in \d+ documents ran/);
  });
});
