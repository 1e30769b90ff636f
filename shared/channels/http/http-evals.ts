import { Hono } from "hono";
import * as z from "zod";
import type { Engine } from "../../engine/engine.ts";
import { MAX_CASES } from "../../evals/dataset.ts";
import {
  checkDataset,
  DATASET_NAME,
  deleteDataset,
  getDataset,
  listDatasets,
  MAX_DATASET_BYTES,
  putDataset,
} from "../../evals/datasets.ts";
import { startExperiment, stopExperiment } from "../../evals/driver.ts";
import { type Experiment, listExperiments, loadExperiment } from "../../evals/experiment.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../kernel/errors.ts";
import type { Authenticated } from "../../ports/key-store.ts";
import { type ApiEnv, readJson } from "./http-kit.ts";

/**
 * The tenant's experiments (shared/evals/: `arbor eval run` stores them), read over the HTTP API
 * (mounted in http-api.ts, behind its key, rate limit and body bound):
 *
 *   GET    /v1/evals/experiments        the experiments' summaries, oldest first         -> 200
 *   GET    /v1/evals/experiments/:id    one, with its runs (each run's request, scores);
 *                                       a running one with its progress                  -> 200
 *   POST   /v1/evals/experiments        runs a dataset on this runtime (a stored one by
 *                                       name, or its text): {dataset | text, name, label,
 *                                       repeat, concurrency, timeoutSeconds}       -> 202 {experiment}
 *   POST   /v1/evals/experiments/:id/stop   launches no more runs, cancels those running;
 *                                       it ends `stopped` with what was scored    -> 200 {experiment}
 *   GET    /v1/evals/datasets           the tenant's datasets (name, cases, size)         -> 200
 *   GET    /v1/evals/datasets/:name     one, with its text                                -> 200
 *   PUT    /v1/evals/datasets/:name     {text}: kept once it parses as a dataset   -> 200 {dataset}
 *   DELETE /v1/evals/datasets/:name                                                     -> 204
 *
 * An experiment started here is driven by the runtime (shared/evals/driver.ts): its requests are the
 * caller's, its questions answered as the cases say, never by a person. At most RUNNING_PER_TENANT
 * run at once in a tenant, so one tenant's experiments cannot fill the engine for everyone.
 *
 * Who may is the policy's call: reading (or, for a change, writing)
 * `cld:common.Tenant.<t>/eval.Experiment.list`, which has no owner, so by default the tenant's
 * admins. Another tenant's experiment or dataset is one that does not exist.
 */
export const RUNNING_PER_TENANT = 2;
export const experimentsUrn = (tenant: string) => `cld:common.Tenant.${tenant}/eval.Experiment.list`;

/** The tenant's experiments, as `who` may read them (the policy first). The console reads them so too. */
export async function readExperiments(engine: Engine, who: Authenticated) {
  await engine.authorize(who, "resource.read", experimentsUrn(who.caller.tenant));
  return listExperiments(engine.deps.state, who.caller.tenant);
}

/** The tenant's kept datasets (without their text), as `who` may read them. */
export async function readDatasets(engine: Engine, who: Authenticated) {
  await engine.authorize(who, "resource.read", experimentsUrn(who.caller.tenant));
  return listDatasets(engine.deps.state, who.caller.tenant);
}

/** One experiment of the tenant with its runs, as `who` may read it; NotFoundError when there is none. */
export async function readExperiment(engine: Engine, who: Authenticated, id: string): Promise<Experiment> {
  await engine.authorize(who, "resource.read", experimentsUrn(who.caller.tenant));
  const experiment = /^[0-9A-Za-z]{4,40}$/.test(id)
    ? await loadExperiment(engine.deps.state, who.caller.tenant, id)
    : undefined;
  if (!experiment) throw new NotFoundError("Experiment", id);
  return experiment;
}

const count = (max: number) => z.coerce.number().int().min(1).max(max);
const StartBody = z
  .object({
    /** A dataset the tenant keeps (PUT /v1/evals/datasets/:name). */
    dataset: z.string().regex(DATASET_NAME).optional(),
    /** Or the dataset's text (JSONL or YAML), with the name it shows under. */
    text: z.string().min(1).max(MAX_DATASET_BYTES).optional(),
    name: z.string().regex(DATASET_NAME).optional(),
    label: z.string().min(1).max(200).optional(),
    repeat: count(20).optional(),
    concurrency: count(16).optional(),
    timeoutSeconds: z.coerce.number().int().min(10).max(3600).optional(),
  })
  .strict();
const DatasetBody = z.object({ text: z.string().min(1).max(MAX_DATASET_BYTES) }).strict();

/** Starts an experiment on this runtime for `who` (the policy first; a tenant runs a few at once). */
export async function startTenantExperiment(
  engine: Engine,
  who: Authenticated,
  body: z.output<typeof StartBody>,
) {
  const { tenant } = who.caller;
  await engine.authorize(who, "resource.write", experimentsUrn(tenant));
  if ((body.dataset === undefined) === (body.text === undefined))
    throw new ValidationError("Give the dataset to run: `dataset` (a stored one's name) or its `text`");
  let name = body.name ?? "inline";
  let text = body.text;
  if (body.dataset !== undefined) {
    const stored = await getDataset(engine.deps.state, tenant, body.dataset);
    if (!stored) throw new NotFoundError("Dataset", body.dataset);
    name = stored.name;
    text = stored.text;
  }
  const cases = checkDataset(text as string, name);
  const repeat = body.repeat ?? 1;
  if (cases.length * repeat > MAX_CASES)
    throw new ValidationError(
      `${cases.length} cases x ${repeat} is more than ${MAX_CASES} runs: fewer repeats, or split the dataset`,
    );
  const running = (await listExperiments(engine.deps.state, tenant)).filter((e) => e.status === "running");
  if (running.length >= RUNNING_PER_TENANT)
    throw new ConflictError(
      `${running.length} experiments of this tenant are running (${running.map((e) => e.id).join(", ")}): start this one when one of them is done`,
    );
  return startExperiment(
    engine,
    { actor: who.actor, caller: { tenant, roles: [...who.caller.roles] } },
    {
      dataset: name,
      cases,
      model: engine.deps.llm.id,
      ...(body.label ? { label: body.label } : {}),
      repeat,
      ...(body.concurrency ? { concurrency: body.concurrency } : {}),
      ...(body.timeoutSeconds ? { timeoutMs: body.timeoutSeconds * 1000 } : {}),
    },
  );
}

export function createEvalRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const may = (who: Authenticated, action: "resource.read" | "resource.write") =>
    engine.authorize(who, action, experimentsUrn(who.caller.tenant));

  app.post("/v1/evals/experiments", async (c) => {
    await may(c.get("who"), "resource.write"); // before the body is read
    const experiment = await startTenantExperiment(engine, c.get("who"), await readJson(c, StartBody));
    return c.json({ experiment }, 202);
  });

  app.post("/v1/evals/experiments/:id/stop", async (c) => {
    const who = c.get("who");
    await may(who, "resource.write");
    const id = c.req.param("id");
    const experiment = /^[0-9A-Za-z]{4,40}$/.test(id)
      ? await stopExperiment(engine, id, {
          actor: who.actor,
          caller: { tenant: who.caller.tenant, roles: [...who.caller.roles] },
        })
      : undefined;
    if (!experiment) throw new NotFoundError("Experiment", id);
    return c.json({ experiment });
  });

  app.get("/v1/evals/datasets", async (c) => c.json({ datasets: await readDatasets(engine, c.get("who")) }));

  app.get("/v1/evals/datasets/:name", async (c) => {
    await may(c.get("who"), "resource.read");
    const dataset = await getDataset(engine.deps.state, c.get("who").caller.tenant, c.req.param("name"));
    if (!dataset) throw new NotFoundError("Dataset", c.req.param("name"));
    return c.json({ dataset });
  });

  app.put("/v1/evals/datasets/:name", async (c) => {
    const who = c.get("who");
    await may(who, "resource.write");
    const { text } = await readJson(c, DatasetBody);
    const dataset = await putDataset(engine.deps.state, who.caller.tenant, c.req.param("name"), text, {
      by: who.actor.id,
      at: engine.deps.clock().toISOString(),
    });
    return c.json({ dataset });
  });

  app.delete("/v1/evals/datasets/:name", async (c) => {
    const who = c.get("who");
    await may(who, "resource.write");
    if (!(await deleteDataset(engine.deps.state, who.caller.tenant, c.req.param("name"))))
      throw new NotFoundError("Dataset", c.req.param("name"));
    return c.body(null, 204);
  });

  app.get("/v1/evals/experiments", async (c) =>
    c.json({ experiments: await readExperiments(engine, c.get("who")) }),
  );

  app.get("/v1/evals/experiments/:id", async (c) =>
    c.json({ experiment: await readExperiment(engine, c.get("who"), c.req.param("id")) }),
  );

  return app;
}
