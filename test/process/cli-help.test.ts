import { describe, expect, it } from "vitest";
import { arborCli } from "../support/arbor-process.ts";

/** `arbor help` and `arbor <command> --help` as a person runs them: real processes. */
const COMMANDS = [
  "run",
  "serve",
  "eval",
  "keys",
  "policy",
  "dlq",
  "notify",
  "team",
  "tools",
  "docs",
  "graph",
  "demo",
  "ls",
  "get",
  "events",
  "replay",
  "help",
];

const arbor = (...args: string[]) =>
  arborCli(args, { ...process.env, NO_COLOR: "1", ARBOR_URL: "", ARBOR_KEY: "" });

describe("arbor help", () => {
  it("every command has its own usage, naming it, with an example", async () => {
    const [global, ...helps] = await Promise.all([arbor("help"), ...COMMANDS.map((c) => arbor(c, "--help"))]);
    const seen = new Set<string>([global.stdout]);
    for (const [i, command] of COMMANDS.entries()) {
      const { code, stdout, stderr } = helps[i] as Awaited<ReturnType<typeof arbor>>;
      expect(stderr, command).toBe("");
      expect(code, command).toBe(0);
      const lines = stdout.split("\n");
      expect(lines[0], command).toMatch(new RegExp(`^Usage: arbor ${command}\\b`));
      // Every way to call it names it: the usage lines run up to the first blank line.
      const usage = lines.slice(0, lines.indexOf(""));
      for (const line of usage.slice(1))
        expect(line, command).toMatch(new RegExp(`^ {7}arbor ${command}\\b`));
      const example = lines.slice(lines.findIndex((l) => /^Examples?$/.test(l)) + 1);
      expect(example[0], command).toMatch(new RegExp(`^  .*\\barbor ${command}\\b`));
      expect(seen.has(stdout), `${command} prints a help of its own`).toBe(false);
      seen.add(stdout);
      expect(lines.length, command).toBeLessThan(30);
    }
  });

  it("arbor help <command> and -h print the same as --help", async () => {
    const [help, flag, short] = await Promise.all([
      arbor("help", "team"),
      arbor("team", "--help"),
      arbor("team", "-h"),
    ]);
    expect(help.stdout).toBe(flag.stdout);
    expect(short.stdout).toBe(flag.stdout);
    // A sub-command's --help is its command's.
    expect((await arbor("keys", "add", "--help")).stdout).toMatch(/^Usage: arbor keys add --id/);
  });

  it("the global help lists every command, once, with what it does", async () => {
    const outputs = await Promise.all([arbor("help"), arbor("--help"), arbor()]);
    for (const { code, stdout } of outputs) {
      expect(code).toBe(0);
      expect(stdout).toBe(outputs[0]?.stdout);
    }
    const text = outputs[0]?.stdout ?? "";
    expect(text).toMatch(/^Usage: arbor <command> \[options\]$/m);
    expect(text).toContain("arbor <command> --help");
    const section = text.slice(
      text.indexOf("\nCommands\n"),
      text.indexOf("\n\n", text.indexOf("\nCommands\n") + 1),
    );
    const listed = section
      .split("\n")
      .slice(2)
      .map((l) => /^ {2}(\S+) {2,}\S/.exec(l)?.[1]);
    expect(listed).toEqual(COMMANDS);
    expect(text).toMatch(/^Settings \(environment\)$/m);
    expect(text).toContain("ARBOR_DATA_DIR");
  });

  it("says so for a command it does not know", async () => {
    for (const args of [
      ["fly", "--help"],
      ["help", "fly"],
    ]) {
      const { code, stdout, stderr } = await arbor(...args);
      expect(code).toBe(1);
      expect(stdout).toBe("");
      expect(stderr).toBe('arbor: Unknown command "fly". Run: arbor help\n');
    }
  });
});
