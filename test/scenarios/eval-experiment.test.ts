import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedLlm } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import { compareExperiments } from "../../shared/evals/compare.ts";
import { parseDataset } from "../../shared/evals/dataset.ts";
import {
  listExperiments,
  loadExperiment,
  runExperiment,
  storeExperiment,
} from "../../shared/evals/experiment.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * An experiment in this process: cases run on the engine with their questions answered by the
 * case, a judge's score beside the deterministic ones (its model and prompt kept), the experiment
 * stored, listed, loaded and compared with a repeat that scores the same.
 */
let h: Harness;
beforeAll(async () => {
  h = await Harness.create({
    script: (r) => {
      if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
      if (isEvaluation(r)) return pass();
      return { content: "Lisbon, at the LX Factory loft." };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
});
afterAll(async () => {
  await h.close();
});

const DATASET = [
  '{"id":"where","request":"Where is the offsite?","expect":{"contains":["Lisbon"],"judge":{"criteria":"Names the city"}}}',
  '{"id":"lazy","request":"Where is the offsite, again?","mode":"lazy","expect":{"approval":"needed","tree":{"maxTasks":1}}}',
].join("\n");

describe("an experiment", () => {
  it("runs, judges, is stored and listed, and compares with itself as unchanged", async () => {
    const judge = new ScriptedLlm(() => ({
      toolCalls: [{ name: "report_score", arguments: { score: 0.9, reason: "It names Lisbon" } }],
    }));
    const cases = parseDataset(DATASET, "d.jsonl");
    const run = () =>
      runExperiment(h.engine, cases, {
        tenant: "acme",
        dataset: "d.jsonl",
        model: "scripted",
        judge,
        repeat: 2,
      });
    const first = await run();
    expect(first.runs).toHaveLength(4);
    const where = first.runs.find((r) => r.caseId === "where");
    expect(where?.scores.map((s) => [s.scorer, s.score])).toEqual([
      ["status", 1],
      ["contains", 1],
      ["judge", 0.9],
    ]);
    expect(where?.scores[2]?.judge).toMatchObject({
      model: "scripted",
      prompt: expect.stringContaining("Names the city"),
    });
    expect(first.runs.find((r) => r.caseId === "lazy")?.score).toBe(1); // its plan approved by the case
    expect(first.scorers).toMatchObject({ status: 1, contains: 1, judge: 0.9, approval: 1, tree: 1 });

    await storeExperiment(h.engine.deps.state, first);
    const second = await run();
    await storeExperiment(h.engine.deps.state, second);
    expect((await listExperiments(h.engine.deps.state, "acme")).map((e) => e.id)).toEqual([
      first.id,
      second.id,
    ]);
    expect(await listExperiments(h.engine.deps.state, "beta")).toEqual([]);
    const loaded = await loadExperiment(h.engine.deps.state, "acme", first.id.slice(-8));
    expect(loaded?.runs).toHaveLength(4);
    expect(await loadExperiment(h.engine.deps.state, "beta", first.id)).toBeUndefined(); // another tenant's
    const c = compareExperiments(loaded as never, second);
    expect(c.regressions).toEqual([]);
    expect(c.improvements).toEqual([]);

    // Over the HTTP API and in the console, for the tenant's admins only.
    const admin = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
    const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
    const app = createServerApp({
      engine: h.engine,
      keys: new ApiKeys({ keys: [admin.entry, bob.entry] }),
      publicUrl: "https://a.example",
    });
    const get = (key: string, path: string, cookie?: string) =>
      app.fetch(
        new Request(`https://a.example${path}`, {
          headers: cookie ? { cookie } : { authorization: `Bearer ${key}` },
        }),
      );
    const listed = (await (await get(admin.key, "/v1/evals/experiments")).json()) as {
      experiments: { id: string }[];
    };
    expect(listed.experiments.map((e) => e.id)).toEqual([first.id, second.id]);
    expect((await get(bob.key, "/v1/evals/experiments")).status).toBe(403);
    const one = (await (await get(admin.key, `/v1/evals/experiments/${second.id}`)).json()) as {
      experiment: { runs: unknown[] };
    };
    expect(one.experiment.runs).toHaveLength(4);
    expect((await get(admin.key, "/v1/evals/experiments/01NOSUCHEXPERIMENT0000000")).status).toBe(404);
    expect((await get(admin.key, "/v1/evals/experiments/..%2f..")).status).toBe(404);
    const signedIn = await app.fetch(
      new Request("https://a.example/console/login", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ key: admin.key }).toString(),
      }),
    );
    const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0] as string;
    const page = await (await get("", "/console/admin/evals", cookie)).text();
    expect(page).toContain(first.id);
    const runs = await (await get("", `/console/admin/evals/${first.id}`, cookie)).text();
    expect(runs).toContain("where");
    expect(runs).toContain(`/console/requests/${encodeURIComponent(first.runs[0]?.rootTaskId as string)}`);
    expect(runs).toContain("It names Lisbon"); // the judge's 0.9, with its reason
  });
});
