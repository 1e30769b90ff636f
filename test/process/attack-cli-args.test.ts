import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arborCli, arborEnv } from "../support/arbor-process.ts";

/**
 * `arbor` called wrongly, as people do: an option it does not know, an option without its value,
 * a value that looks like an option. Each is a usage error: the problem, then the usage lines of
 * the command it was for (or where to look when no command is named), exit code 1.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-attack-args-"));
  env = arborEnv(join(dir, "data"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("arbor with options it cannot parse", () => {
  it("prints the problem and the command's usage, exit code 1", async () => {
    const cases: [string[], RegExp, string][] = [
      [["run", "--foo"], /Unknown option '--foo'/, "Usage: arbor run"],
      [["serve", "--port", "-1"], /'--port' argument is ambiguous/, "Usage: arbor serve"],
      [["keys", "add", "--id"], /'--id <value>' argument missing/, "Usage: arbor keys add"],
      [["ls", "--all=3"], /'--all' does not take an argument/, "Usage: arbor ls"],
      [["--bogus"], /Unknown option '--bogus'/, "Run: arbor help"],
    ];
    for (const [args, problem, usage] of cases) {
      const { code, stdout, stderr } = await arborCli(args, env);
      expect(code, args.join(" ")).toBe(1);
      expect(stderr, args.join(" ")).toMatch(problem);
      expect(stderr, args.join(" ")).toContain(usage);
      expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(stdout).toBe("");
    }
  }, 120_000);

  it("says in a line what is wrong with a URN given to get and events, exit code 1", async () => {
    const huge = `cld:common.Tenant.local/${"a".repeat(90_000)}`;
    const cases: [string[], RegExp][] = [
      [["events", "garbage"], /Invalid URN "garbage"/],
      [["events", "cld:common.Tenant.local/plan.Task.nope"], /no such task/],
      [["get", "garbage"], /Invalid URN "garbage"/],
      [["get", huge], /longer than 1000 characters/],
      [["events", huge], /longer than 1000 characters/],
    ];
    for (const [args, problem] of cases) {
      const { code, stderr } = await arborCli(args, env);
      expect(code, args[0]).toBe(1);
      expect(stderr, args[0]).toMatch(problem);
      expect(stderr.length, args[0]).toBeLessThan(2000);
    }
  }, 120_000);
});
