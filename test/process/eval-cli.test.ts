import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ASSISTANTS } from "../../examples/offsite/scenario.ts";
import { loadExperiment } from "../../shared/evals/experiment.ts";
import { type LocalConfig, loadConfig } from "../../shared/runtime/config.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { arborCli, arborEnv } from "../support/arbor-process.ts";

/**
 * `arbor eval` as a CI job runs it: the example's dataset offline, stored and listed; the same
 * dataset after a change to an assistant's description that sends a task to the wrong assistant,
 * and the comparison that exits 1 with --fail-on-regression; a score under --fail-under exits 1.
 */
const DATASET = join(import.meta.dirname, "../../examples/offsite/eval.jsonl");
let dir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-eval-"));
  env = arborEnv(join(dir, "data"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * The example's team file with Communications no longer reading as the one to invite people (it
 * waters the office plants): the invitation goes to another assistant, with other tools.
 */
async function plantsTeam(): Promise<string> {
  const team = {
    assistants: ASSISTANTS.map((a) =>
      a.id === "communications"
        ? { ...a, purpose: "Keep the office plants watered", applicability: "Plants and office upkeep" }
        : a,
    ),
  };
  const file = join(dir, "plants.json");
  await writeFile(file, JSON.stringify(team));
  return file;
}

const idOf = (stdout: string) => /experiment (\S+),/.exec(stdout)?.[1] as string;

describe("arbor eval", () => {
  it("runs the example's dataset offline, stores it, and a changed team's regression fails the gate", async () => {
    const good = await arborCli(["eval", "run", DATASET, "--example", "offsite", "--fail-under", "1"], env);
    expect(good.stderr).toBe("");
    expect(good.code).toBe(0);
    expect(good.stdout).toMatch(/Experiment: 4 cases of .*eval\.jsonl, 4 runs, model scripted/);
    expect(good.stdout).toMatch(/Score: 100\.0 %/);
    for (const id of ["offsite", "offsite-denied", "sum", "plain"])
      expect(good.stdout).toContain(`] ${id}: 100.0 %`);
    const before = idOf(good.stdout);

    // Communications no longer reads as the one to invite people: the invitation goes elsewhere.
    const teamFile = await plantsTeam();
    const worse = await arborCli(
      [
        "eval",
        "run",
        DATASET,
        "--example",
        "offsite",
        "--team",
        teamFile,
        "--label",
        "plants",
        "--fail-under",
        "0.95",
      ],
      env,
    );
    expect(worse.code).toBe(1);
    expect(worse.stdout).toMatch(/"Invite the team" went to \S+, not communications/);
    expect(worse.stdout).toMatch(/Failed: the score .* is under --fail-under 95\.0 %/);
    const after = idOf(worse.stdout);

    const listed = await arborCli(["eval", "ls"], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(before);
    expect(listed.stdout).toMatch(new RegExp(`${after} .* plants`));

    const compared = await arborCli(
      ["eval", "compare", before, after.slice(-8), "--fail-on-regression"],
      env,
    );
    expect(compared.code).toBe(1);
    expect(compared.stdout).toMatch(/Worse: [1-9]/);
    expect(compared.stdout).toMatch(/offsite elected: 100\.0 % -> 66\.7 %/);
    expect((await arborCli(["eval", "compare", before, before], env)).code).toBe(0);
    const unknown = await arborCli(["eval", "compare", before, "nosuch"], env);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/No experiment nosuch/);
  }, 180_000);

  it("scores with the team's own scorer modules, and says which module is not one", async () => {
    const reach = join(dir, "reach.mjs");
    await writeFile(
      reach,
      'export default ({ run }) => (/team@example\\.com|offline example/.test(run.answer) ? 1 : { score: 0, reason: "says nothing of the team" });\n',
    );
    const broken = join(dir, "broken.mjs");
    await writeFile(broken, 'export default () => { throw new Error("out of order"); };\n');
    const res = await arborCli(
      ["eval", "run", DATASET, "--example", "offsite", "--scorer", reach, "--scorer", broken],
      env,
    );
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/sum: .*reach: says nothing of the team/); // the sum's answer is a figure
    expect(res.stdout).toMatch(/^ {2}reach +75\.0 %$/m);
    expect(res.stdout).toMatch(/broken: the scorer threw: out of order/);
    const notOne = join(dir, "none.mjs");
    await writeFile(notOne, "export const x = 1;\n");
    const refused = await arborCli(["eval", "run", DATASET, "--example", "offsite", "--scorer", notOne], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/none\.mjs has no default export that is a function/);
  }, 120_000);

  it("records a run, replays it with no model at all to the same answers, and reports a divergence", async () => {
    const recording = join(dir, "offsite.recording.json");
    const recorded = await arborCli(
      ["eval", "run", DATASET, "--example", "offsite", "--record", recording],
      env,
    );
    expect(recorded.code).toBe(0);
    expect(recorded.stdout).toMatch(/Recorded: \d+ model responses and \d+ tool results to /);
    // No --example and no model configured: every answer comes from the recording, or the run fails.
    const replayed = await arborCli(["eval", "run", DATASET, "--replay", recording], env);
    expect(replayed.stderr).toBe("");
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toMatch(/model replay:scripted/);
    expect(replayed.stdout).toMatch(/Score: 100\.0 %/);
    const calls = Number(
      /Replayed: (\d+) model calls answered from .*, none made/.exec(replayed.stdout)?.[1],
    );
    expect(calls).toBeGreaterThan(20);
    expect(replayed.stdout).not.toMatch(/Diverged/);
    const answers = async (stdout: string) => {
      const rt = createLocalRuntime(loadConfig(env) as LocalConfig);
      try {
        const e = await loadExperiment(rt.state, "local", idOf(stdout));
        return Object.fromEntries((e?.runs ?? []).map((r) => [r.caseId, r.answer]));
      } finally {
        await rt.close();
      }
    };
    expect(await answers(replayed.stdout)).toEqual(await answers(recorded.stdout));

    // The team changed: the invitation goes to an assistant with other tools, a call never recorded.
    const teamFile = await plantsTeam();
    const diverged = await arborCli(["eval", "run", DATASET, "--replay", recording, "--team", teamFile], env);
    expect(diverged.code).toBe(1);
    expect(diverged.stdout).toMatch(/Diverged: \d+ call\(s\) the recording has not/);
    expect(diverged.stdout).toMatch(/a model call at task "Invite the team", turn 1/);
    const bad = join(dir, "bad.recording.json");
    await writeFile(bad, '{"version":2}');
    const refused = await arborCli(["eval", "run", DATASET, "--replay", bad], env);
    expect(refused.stderr).toMatch(/bad\.recording\.json is not a recording/);
  }, 180_000);

  it("says what is wrong with a dataset, and runs nothing", async () => {
    const bad = join(dir, "bad.jsonl");
    await writeFile(bad, '{"id":"a","request":"x","expect":{"contans":["y"]}}\n');
    const res = await arborCli(["eval", "run", bad, "--example", "offsite"], env);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toMatch(/bad\.jsonl, line 1, is not a valid case.*contans/);
    const missing = await arborCli(["eval", "run", join(dir, "none.jsonl"), "--example", "offsite"], env);
    expect(missing.stderr).toMatch(/Cannot read the dataset .*no such file/);
    expect((await arborCli(["eval", "run", bad, "--repeat", "0"], env)).stderr).toMatch(
      /--repeat takes a number/,
    );
    // Pointed at a remote Arbor, it goes there (never quietly runs on this folder instead).
    const remote = await arborCli(["eval", "ls"], {
      ...env,
      ARBOR_URL: "http://127.0.0.1:9",
      ARBOR_KEY: "arbor_x",
    });
    expect(remote.code).not.toBe(0);
    expect(remote.stderr).toMatch(/Cannot reach Arbor at http:\/\/127\.0\.0\.1:9/);
  }, 120_000);
});
