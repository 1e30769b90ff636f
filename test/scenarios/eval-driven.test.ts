import type { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { createServerApp } from "../../shared/channels/http/http-server.ts";
import type { Message } from "../../shared/domain/resources.ts";
import { parseDataset } from "../../shared/evals/dataset.ts";
import { driveExperiments, startExperiment, sweepExperiments } from "../../shared/evals/driver.ts";
import { type Experiment, loadExperiment } from "../../shared/evals/experiment.ts";
import { ForbiddenError } from "../../shared/kernel/errors.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Experiments the runtime drives (shared/evals/driver.ts), started over the HTTP API: datasets kept
 * by the tenant, every case's request moved on by its own events (questions answered as the case
 * says, history first, scored once), at most a few running per tenant, a run past its deadline
 * scored as a timeout, and an experiment a crashed process left running finished by the next.
 */
const BASE = "https://arbor.example";
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
const eve = newApiKey({ id: "user_eve", kind: "human", tenant: "evil", roles: ["admin"] });

/** Requests that say "hold" wait until `release()`: experiments that stay running for a while. */
let release: () => void = () => {};
let held = new Promise<void>((r) => {
  release = r;
});
const hold = () => {
  held = new Promise<void>((r) => {
    release = r;
  });
};

let h: Harness;
let app: Hono;
let stopDriving: () => void;

beforeAll(async () => {
  h = await Harness.create({
    script: async (r) => {
      const text = JSON.stringify(r.messages);
      if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
      if (isEvaluation(r)) return pass();
      if (text.includes("hold")) await held;
      return {
        content: text.includes("three days") ? "Three days in Lisbon." : "Lisbon, at the LX Factory loft.",
      };
    },
    assistants: GENERALIST,
    settings: { electionThreshold: -1 },
  });
  app = createServerApp({
    engine: h.engine,
    keys: new ApiKeys({ keys: [ada.entry, bob.entry, eve.entry] }),
    publicUrl: BASE,
  });
  stopDriving = driveExperiments(h.engine, { sweepEveryMs: 100 });
});
afterAll(async () => {
  stopDriving();
  release();
  await h.close();
});

const call = (key: string, method: string, path: string, body?: unknown) =>
  app.fetch(
    new Request(`${BASE}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );

async function finished(id: string, key = ada.key): Promise<Experiment> {
  for (let i = 0; i < 600; i++) {
    const res = await call(key, "GET", `/v1/evals/experiments/${id}`);
    const { experiment } = (await res.json()) as { experiment: Experiment };
    if (experiment.status !== "running") return experiment;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`experiment ${id} did not finish`);
}

const DATASET = [
  '{"id":"where","request":"Where is the offsite?","expect":{"contains":["Lisbon"]}}',
  '{"id":"lazy","request":"Where is the offsite, again?","mode":"lazy","expect":{"approval":"needed","contains":["Lisbon"]}}',
  '{"id":"follow-up","history":["Plan the offsite in Lisbon"],"request":"Now make it three days","expect":{"contains":["three days"]}}',
  '{"id":"wrong","request":"Where is the offsite, once more?","expect":{"contains":["Porto"]}}',
].join("\n");

describe("datasets kept by the tenant", () => {
  it("are checked at upload, listed, read back and deleted, by the tenant's admins only", async () => {
    const put = await call(ada.key, "PUT", "/v1/evals/datasets/offsite", { text: DATASET });
    expect(put.status).toBe(200);
    expect(((await put.json()) as { dataset: { cases: number } }).dataset.cases).toBe(4);

    const bad = await call(ada.key, "PUT", "/v1/evals/datasets/broken", { text: '{"id":"x"}\n{"id":' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toMatch(/line 2/);
    const badName = await call(ada.key, "PUT", "/v1/evals/datasets/..%2fetc", { text: DATASET });
    expect(badName.status).toBe(400);
    const big = await call(ada.key, "PUT", "/v1/evals/datasets/big", { text: "x".repeat(200_000) });
    expect(big.status).toBe(400);

    const listed = (await (await call(ada.key, "GET", "/v1/evals/datasets")).json()) as {
      datasets: { name: string; cases: number; updatedBy: string }[];
    };
    expect(listed.datasets).toEqual([
      expect.objectContaining({ name: "offsite", cases: 4, updatedBy: "user_ada" }),
    ]);
    const one = (await (await call(ada.key, "GET", "/v1/evals/datasets/offsite")).json()) as {
      dataset: { text: string };
    };
    expect(one.dataset.text).toBe(DATASET);

    expect((await call(bob.key, "GET", "/v1/evals/datasets")).status).toBe(403);
    expect((await call(bob.key, "PUT", "/v1/evals/datasets/mine", { text: DATASET })).status).toBe(403);
    // Another tenant's admin sees none of it, and cannot delete it.
    expect(
      ((await (await call(eve.key, "GET", "/v1/evals/datasets")).json()) as { datasets: [] }).datasets,
    ).toEqual([]);
    expect((await call(eve.key, "GET", "/v1/evals/datasets/offsite")).status).toBe(404);
    expect((await call(eve.key, "DELETE", "/v1/evals/datasets/offsite")).status).toBe(404);

    expect((await call(ada.key, "PUT", "/v1/evals/datasets/spare", { text: DATASET })).status).toBe(200);
    expect((await call(ada.key, "DELETE", "/v1/evals/datasets/spare")).status).toBe(204);
    expect((await call(ada.key, "DELETE", "/v1/evals/datasets/spare")).status).toBe(404);
  });
});

describe("an experiment started over the HTTP API", () => {
  it("runs every case on the runtime, answers its questions, runs its history first, and is scored", async () => {
    const started = await call(ada.key, "POST", "/v1/evals/experiments", {
      dataset: "offsite",
      label: "main",
      concurrency: 2,
    });
    expect(started.status).toBe(202);
    const { experiment } = (await started.json()) as { experiment: Experiment };
    expect(experiment).toMatchObject({
      status: "running",
      dataset: "offsite",
      label: "main",
      startedBy: "user_ada",
    });

    const done = await finished(experiment.id);
    expect(done.runs.map((r) => [r.caseId, r.status, r.score]).sort()).toEqual([
      ["follow-up", "done", 1],
      ["lazy", "done", 1],
      ["where", "done", 1],
      ["wrong", "done", 0.5],
    ]);
    expect(done.score).toBeCloseTo(3.5 / 4);
    expect(done.scorers).toMatchObject({ status: 1, approval: 1 });
    // The history's request ran first, in the same conversation, and the case's answer is its own.
    const followUp = done.runs.find((r) => r.caseId === "follow-up");
    expect(followUp?.answer).toContain("Three days");
    const conversation = followUp?.rootTaskId.split("/common.Message.")[0] as string;
    const messages = (await h.engine.deps.resources.children(conversation, "common.Message")) as Message[];
    expect(
      messages
        .filter((m) => m.role === "user")
        .map((m) => m.content)
        .sort(),
    ).toEqual(["Now make it three days", "Plan the offsite in Lisbon"]);
    // Every request is the starter's, like the other requests they send.
    const view = await h.engine.result(followUp?.rootTaskId as string, {
      actor: { id: "user_ada", kind: "human" },
      caller: { tenant: "acme", roles: ["admin"] },
    });
    expect(view.view?.status).toBe("done");
    // Listed, for admins, with its totals.
    const listed = (await (await call(ada.key, "GET", "/v1/evals/experiments")).json()) as {
      experiments: Experiment[];
    };
    expect(listed.experiments.find((e) => e.id === experiment.id)).toMatchObject({
      status: "done",
      cases: 4,
    });
  });

  it("takes a dataset's text, and refuses what cannot run with a reason", async () => {
    const inline = await call(ada.key, "POST", "/v1/evals/experiments", {
      text: '{"id":"one","request":"Where is the offsite?","expect":{"contains":["Lisbon"]}}',
      name: "quick",
      repeat: "2",
    });
    expect(inline.status).toBe(202);
    const { experiment } = (await inline.json()) as { experiment: Experiment };
    const done = await finished(experiment.id);
    expect(done).toMatchObject({ dataset: "quick", repeat: 2, score: 1 });
    expect(done.runs).toHaveLength(2);

    const refusals: [unknown, number, RegExp][] = [
      [{}, 400, /dataset/],
      [{ dataset: "offsite", text: DATASET }, 400, /dataset/],
      [{ dataset: "nosuch" }, 404, /nosuch/],
      [{ text: "not a dataset: [" }, 400, /JSONL nor YAML|not a valid case|list of cases/],
      [{ dataset: "offsite", repeat: 1000 }, 400, /repeat/],
      [{ dataset: "offsite", concurrency: "lots" }, 400, /concurrency/],
      [{ dataset: "offsite", extra: true }, 400, /extra/],
    ];
    for (const [body, status, message] of refusals) {
      const res = await call(ada.key, "POST", "/v1/evals/experiments", body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(await res.json())).toMatch(message);
    }
    expect((await call(bob.key, "POST", "/v1/evals/experiments", { dataset: "offsite" })).status).toBe(403);
    expect((await call(eve.key, "POST", "/v1/evals/experiments", { dataset: "offsite" })).status).toBe(404);
    expect((await call(eve.key, "GET", `/v1/evals/experiments/${experiment.id}`)).status).toBe(404);
  });

  it("lets a tenant run only a few at once, and a crashed process's experiment is finished by the next", async () => {
    hold();
    const text = '{"id":"held","request":"hold: where is the offsite?","expect":{"contains":["Lisbon"]}}';
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await call(ada.key, "POST", "/v1/evals/experiments", { text, name: `held-${i}` });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { experiment: Experiment }).experiment.id);
    }
    const third = await call(ada.key, "POST", "/v1/evals/experiments", { text });
    expect(third.status).toBe(409);
    expect(JSON.stringify(await third.json())).toContain(ids[0]);
    const running = (await (await call(ada.key, "GET", `/v1/evals/experiments/${ids[0]}`)).json()) as {
      experiment: Experiment;
    };
    expect(running.experiment).toMatchObject({ status: "running", progress: { scored: 0, runs: 1 } });

    // The driver stops (as a process that dies): the requests end with nobody hearing their events.
    stopDriving();
    release();
    await h.idle();
    const missed = (await (await call(ada.key, "GET", `/v1/evals/experiments/${ids[0]}`)).json()) as {
      experiment: Experiment;
    };
    expect(missed.experiment.status).toBe("running");
    // The next driver's first sweep finds the ended requests, scores them and finishes both.
    stopDriving = driveExperiments(h.engine, { sweepEveryMs: 100 });
    for (const id of ids) expect(await finished(id)).toMatchObject({ status: "done", score: 1 });
  });

  it("cancels a run past its deadline and scores it as a timeout", async () => {
    hold();
    const asker = {
      actor: { id: "user_ada", kind: "human" as const },
      caller: { tenant: "acme", roles: ["admin"] },
    };
    const cases = parseDataset(
      '{"id":"slow","request":"hold on, where?","expect":{"contains":["Lisbon"]}}',
      "t",
    );
    const started = await startExperiment(h.engine, asker, {
      dataset: "t",
      cases,
      model: "m",
      timeoutMs: 1_000,
    });
    await new Promise((r) => setTimeout(r, 200));
    h.advance(5_000); // the clock the deadline is read on
    await sweepExperiments(h.engine);
    release();
    const done = await finished(started.id);
    expect(done.runs[0]).toMatchObject({ caseId: "slow", status: "timeout" });
    expect(done.runs[0]?.scores.find((x) => x.scorer === "status")).toMatchObject({
      score: 0,
      reason: "the request ended timeout, not done",
    });
    expect((await loadExperiment(h.engine.deps.state, "acme", started.id))?.status).toBe("done");
  });

  it("stops: no more runs launched, the running one canceled, and it ends with what was scored", async () => {
    hold();
    const text = ["one", "two", "three"]
      .map(
        (id) =>
          `{"id":"${id}","request":"hold: where is the offsite (${id})?","expect":{"contains":["Lisbon"]}}`,
      )
      .join("\n");
    const started = await call(ada.key, "POST", "/v1/evals/experiments", { text, concurrency: 1 });
    const { id } = ((await started.json()) as { experiment: Experiment }).experiment;
    expect((await call(bob.key, "POST", `/v1/evals/experiments/${id}/stop`)).status).toBe(403);
    expect((await call(eve.key, "POST", `/v1/evals/experiments/${id}/stop`)).status).toBe(404);
    const stopped = await call(ada.key, "POST", `/v1/evals/experiments/${id}/stop`);
    expect(stopped.status).toBe(200);
    expect(((await stopped.json()) as { experiment: Experiment }).experiment.stopped).toMatchObject({
      by: "user_ada",
    });
    release();
    const done = await finished(id);
    expect(done.status).toBe("stopped");
    expect(done.runs.map((r) => [r.caseId, r.status])).toEqual([["one", "canceled"]]);
    // Stopping it again says how it ended; an id that is no experiment is not found.
    expect(
      (
        (await (await call(ada.key, "POST", `/v1/evals/experiments/${id}/stop`)).json()) as {
          experiment: Experiment;
        }
      ).experiment.status,
    ).toBe("stopped");
    expect((await call(ada.key, "POST", "/v1/evals/experiments/nosuch000/stop")).status).toBe(404);
  });

  it("scores a request the engine refuses as failed, saying why, and goes on", async () => {
    const asker = {
      actor: { id: "user_ada", kind: "human" as const },
      caller: { tenant: "acme", roles: ["admin"] },
    };
    // The engine refuses the first case's request (as a policy would); the rest run.
    const engine = new Proxy(h.engine, {
      get(target, property) {
        if (property === "submit")
          return (req: { text: string }) =>
            req.text.includes("forbidden")
              ? Promise.reject(new ForbiddenError("not allowed to send this"))
              : target.submit(req as never);
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const cases = parseDataset(
      [
        '{"id":"refused","request":"forbidden: where?","expect":{"contains":["Lisbon"]}}',
        '{"id":"fine","request":"Where is it?","expect":{"contains":["Lisbon"]}}',
      ].join("\n"),
      "r",
    );
    const started = await startExperiment(engine, asker, { dataset: "r", cases, model: "m", concurrency: 1 });
    const done = await finished(started.id);
    expect(done.status).toBe("done");
    const refused = done.runs.find((r) => r.caseId === "refused");
    expect(refused).toMatchObject({ status: "failed", score: 0, rootTaskId: "" });
    expect(refused?.scores[0]?.reason).toBe("the request was refused: not allowed to send this");
    expect(done.runs.find((r) => r.caseId === "fine")).toMatchObject({ status: "done", score: 1 });
  });

  it("counts a question answered by a process that died before noting it", async () => {
    const asker = {
      actor: { id: "user_ada", kind: "human" as const },
      caller: { tenant: "acme", roles: ["admin"] },
    };
    // No driver hears the request's events after its start.
    stopDriving();
    const cases = parseDataset(
      '{"id":"approved","request":"Where is the offsite, in short?","mode":"lazy","expect":{"approval":"needed"}}',
      "q",
    );
    const started = await startExperiment(h.engine, asker, { dataset: "q", cases, model: "m" });
    await h.idle();
    // As a process that answered the plan's question and died before the run noted it: the run's
    // record knows of no question, while the request asked one and was answered.
    const [run] = (
      await h.engine.deps.state.byParent<{ state: string; questions: unknown[]; rootTaskId: string }>(
        `eval-experiment#${started.id}`,
      )
    ).items;
    expect(run?.data.state).toBe("running");
    expect(run?.data.questions).toHaveLength(1);
    const { version, ...record } = run as NonNullable<typeof run>;
    await h.engine.deps.state.transact([
      { op: "put", record: { ...record, data: { ...record.data, questions: [] } }, expectedVersion: version },
    ]);
    expect((await h.engine.result(run?.data.rootTaskId as string, asker)).view?.status).toBe("done");
    // The next process's sweep scores it: the request itself says a question was asked and answered.
    stopDriving = driveExperiments(h.engine, { sweepEveryMs: 100 });
    const done = await finished(started.id);
    expect(done.runs[0]?.scores.find((x) => x.scorer === "approval")).toMatchObject({ score: 1 });
  });
});
