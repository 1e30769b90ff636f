import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { globalHelp, REMOTE_NOTE } from "../../../../cli/command.ts";
import { COMMANDS } from "../../../../cli/commands/index.ts";

const DIR = join(import.meta.dirname, "../../../../cli/commands");

describe("the CLI's command table", () => {
  it("has one file per command, and every command file in it", () => {
    const files = readdirSync(DIR)
      .filter((f) => f !== "index.ts")
      .map((f) => f.replace(/\.ts$/, ""))
      .sort();
    const named = COMMANDS.map((c) => c.name).filter((n) => n !== "help");
    expect([...named].sort()).toEqual(files);
    expect(new Set(named).size).toBe(named.length);
  });

  it("every command runs somewhere, and says so in its help when it runs remotely", () => {
    for (const command of COMMANDS.filter((c) => c.name !== "help")) {
      expect(command.local ?? command.remote, command.name).toBeDefined();
      const saysRemote = command.notes?.some((n) => n.startsWith(REMOTE_NOTE)) ?? false;
      expect(saysRemote, command.name).toBe(command.remote !== undefined);
      for (const usage of command.usage) expect(usage.split(" ")[0], command.name).toBe(command.name);
      expect(command.examples.length, command.name).toBeGreaterThan(0);
    }
  });

  it("arbor help lists every command and the ones that run remotely", () => {
    const text = globalHelp(COMMANDS);
    for (const command of COMMANDS) expect(text).toMatch(new RegExp(`^  ${command.name} +\\S`, "m"));
    expect(text.replace(/\s+/g, " ")).toContain(
      "run, eval, notify, team, tools, docs, graph, ls, get, events speak to",
    );
  });
});
