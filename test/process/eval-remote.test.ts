import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addKey,
  arborCli,
  arborEnv,
  killAll,
  killHard,
  type Served,
  startServe,
} from "../support/arbor-process.ts";

/**
 * `arbor eval` against a running `arbor serve` (ARBOR_URL): a dataset uploaded and kept by the
 * tenant, experiments run there (by the kept name and from a file's text) and followed here, listed
 * and compared there; what only the local runtime can do is refused with the way to do it; and an
 * experiment running when the server is killed -9 is finished by the next server on the folder.
 */
const DATASET = join(import.meta.dirname, "../../examples/offsite/eval.jsonl");
let dir: string;
let data: string;
let admin: string;
let ada: string;
let served: Served;
const remote = (key: string) => arborEnv(join(dir, "cli"), { ARBOR_URL: served.url, ARBOR_KEY: key });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-eval-remote-"));
  data = join(dir, "served");
  const env = arborEnv(data);
  admin = await addKey(env, "user_root", "acme", ["admin"]);
  ada = await addKey(env, "user_ada");
  served = await startServe(env, ["--example", "offsite"]);
}, 60_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const idOf = (stdout: string) => /Experiment (\S+):/.exec(stdout)?.[1] as string;

describe("arbor eval with ARBOR_URL", () => {
  it("uploads a dataset, runs it there by name and from a file, lists and compares", async () => {
    const up = await arborCli(["eval", "upload", DATASET, "--name", "offsite"], remote(admin));
    expect(up.stderr).toBe("");
    expect(up.stdout).toMatch(/Uploaded: offsite, 4 cases \(\d+ bytes\) to http/);
    const kept = await arborCli(["eval", "datasets"], remote(admin));
    expect(kept.stdout).toMatch(/^offsite +4 cases .* user_root$/m);

    const byName = await arborCli(
      ["eval", "run", "offsite", "--fail-under", "1", "--label", "main"],
      remote(admin),
    );
    expect(byName.stderr).toBe("");
    expect(byName.code).toBe(0);
    expect(byName.stdout).toMatch(/Experiment \S+: 4 cases of offsite, 4 runs, on http/);
    for (const id of ["offsite", "offsite-denied", "sum", "plain"])
      expect(byName.stdout).toContain(`] ${id}: 100.0 %`);
    expect(byName.stdout).toMatch(/Score: 100\.0 %/);

    const fromFile = await arborCli(["eval", "run", DATASET, "--repeat", "2"], remote(admin));
    expect(fromFile.code).toBe(0);
    expect(fromFile.stdout).toMatch(/4 cases of eval\.jsonl, 8 runs/);

    const listed = await arborCli(["eval", "ls"], remote(admin));
    expect(listed.stdout).toMatch(new RegExp(`${idOf(byName.stdout)} .* offsite .* main`));
    const compared = await arborCli(
      ["eval", "compare", idOf(byName.stdout), idOf(fromFile.stdout), "--fail-on-regression"],
      remote(admin),
    );
    expect(compared.code).toBe(0);
    expect(compared.stdout).toMatch(/Worse: 0/);
  }, 180_000);

  it("refuses what only the local runtime does, and a person who is not an admin", async () => {
    const scorer = await arborCli(
      ["eval", "run", DATASET, "--scorer", "x.mjs", "--example", "offsite"],
      remote(admin),
    );
    expect(scorer.code).not.toBe(0);
    expect(scorer.stderr).toMatch(/--example, --scorer are for the local runtime: unset ARBOR_URL/);
    const notAdmin = await arborCli(["eval", "run", DATASET], remote(ada));
    expect(notAdmin.code).not.toBe(0);
    expect(notAdmin.stderr).toMatch(/403|not allowed|forbidden/i);
    const missing = await arborCli(["eval", "run", "nosuch"], remote(admin));
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/nosuch/);
    const locally = await arborCli(["eval", "datasets"], arborEnv(join(dir, "elsewhere")));
    expect(locally.code).not.toBe(0);
    expect(locally.stderr).toMatch(/set ARBOR_URL and ARBOR_KEY/);
  }, 60_000);

  it("finishes, after kill -9 of the server, the experiment it was running", async () => {
    const started = arborCli(
      ["eval", "run", "offsite", "--repeat", "15", "--concurrency", "1"],
      remote(admin),
    );
    // Wait until some runs are scored, then kill the server under the running experiment.
    let experiment = "";
    for (let i = 0; i < 600 && !experiment; i++) {
      const ls = await arborCli(["eval", "ls"], remote(admin));
      experiment = /^(\S+) .* 4 cases x15 .* running$/m.exec(ls.stdout)?.[1] ?? "";
      if (!experiment) await new Promise((r) => setTimeout(r, 100));
    }
    expect(experiment).not.toBe("");
    await killHard(served);
    const followed = await started;
    expect(followed.code).not.toBe(0); // the server it followed is gone
    served = await startServe(arborEnv(data), ["--example", "offsite"]);
    let done = "";
    for (let i = 0; i < 600 && !done; i++) {
      const ls = await arborCli(["eval", "ls"], remote(admin));
      done = new RegExp(`^${experiment} .*`, "m").exec(ls.stdout)?.[0] ?? "";
      if (/running$/.test(done)) done = "";
      if (!done) await new Promise((r) => setTimeout(r, 200));
    }
    expect(done).toMatch(/100\.0 % +4 cases x15/);
  }, 240_000);
});
