import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, killAll, startServe } from "../support/arbor-process.ts";

/**
 * A tools file (ARBOR_TOOLS_FILE) replaces the built-in tools; the built-in team, and a tenant's
 * team applied before, may still list tools that are then not there. `arbor serve` says so when it
 * starts, in what it prints and in its log, naming each assistant and the tools it lacks.
 */
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-tool-gaps-"));
  // The built-in team (no --example): a model is configured, and never called here.
  env = arborEnv(join(dir, "data"), {
    ARBOR_TENANT: "acme",
    POWERTOOLS_LOG_LEVEL: "WARN",
    ARBOR_MODEL_PROVIDER: "openai",
    ARBOR_OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    ARBOR_MODEL: "unused",
  });
  await addKey(env, "user_ada", "acme");
  // acme's own team, applied while the registry was the built-ins.
  const team = join(dir, "team.json");
  await writeFile(
    team,
    JSON.stringify({
      assistants: [
        { name: "Mailer", purpose: "Send the emails people ask for", tools: ["send_email", "calculator"] },
        { name: "Counter", purpose: "Count and add up", tools: ["calculator"] },
      ],
    }),
  );
  const applied = await arborCli(["team", "apply", team, "--yes"], env);
  expect(applied.code, applied.stderr).toBe(0);
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("arbor serve with a tools file that lacks tools the teams list", () => {
  it("warns at start, in its output and its log, naming the assistants and their missing tools", async () => {
    const tools = join(dir, "tools.json");
    await writeFile(
      tools,
      JSON.stringify({ tools: { calculator: { kind: "builtin", function: "calculator" } } }),
    );
    const served = await startServe({ ...env, ARBOR_TOOLS_FILE: tools }, []);
    const out = served.output();
    const warnings = out.split("\n").filter((l) => l.startsWith("Warning: "));
    expect(warnings).toHaveLength(2);
    const [builtIn, tenant] = warnings as [string, string];
    expect(builtIn).toMatch(/^Warning: The tool registry has no .*which the default team lists: /);
    for (const expected of [
      "Researcher (word_count, read_resource)",
      "Writer (word_count, send_email, read_resource)",
      "Analyst (read_resource)",
      "Engineer (sha256, read_resource)",
      "Generalist (word_count, read_resource)",
    ])
      expect(builtIn).toContain(expected);
    // What to do: add them to the tools file (a built-in's entry shown), or give the team other tools.
    expect(builtIn).toContain('"word_count": {"kind":"builtin","function":"word_count"}');
    expect(builtIn).toMatch(/ARBOR_TEAM_FILE, or arbor team apply <file>/);
    expect(tenant).toMatch(
      /^Warning: The tool registry has no send_email, which tenant acme's team lists: Mailer \(send_email\)\./,
    );
    expect(tenant).not.toContain("Counter");
    // The structured log says the same, one line per team.
    const logged = out
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as { level: string; message: string; team?: string });
    const gaps = logged.filter((l) => l.level === "WARN" && l.message.startsWith("The tool registry has no"));
    expect(gaps.map((l) => l.team).sort()).toEqual(["tenant acme's team", "the default team"]);
    await served.stop(); // one process per data folder
  }, 60_000);

  it("says nothing without a tools file (the built-ins have every tool the teams list)", async () => {
    const served = await startServe(env, []);
    expect(served.output()).not.toMatch(/Warning|The tool registry has no/);
  }, 60_000);
});
