import { Hono } from "hono";
import type { Engine } from "../../engine/engine.ts";
import { type Experiment, listExperiments, loadExperiment } from "../../evals/experiment.ts";
import { NotFoundError } from "../../kernel/errors.ts";
import type { Authenticated } from "../../ports/key-store.ts";
import type { ApiEnv } from "./http-kit.ts";

/**
 * The tenant's experiments (shared/evals/: `arbor eval run` stores them), read over the HTTP API
 * (mounted in http-api.ts, behind its key, rate limit and body bound):
 *
 *   GET /v1/evals/experiments         the experiments' summaries, oldest first          -> 200
 *   GET /v1/evals/experiments/:id     one, with its runs (each run's request, scores)   -> 200
 *
 * Who may is the policy's call: reading `cld:common.Tenant.<t>/eval.Experiment.list`, which has no
 * owner, so by default the tenant's admins. Another tenant's experiment is one that does not exist.
 */
export const experimentsUrn = (tenant: string) => `cld:common.Tenant.${tenant}/eval.Experiment.list`;

/** The tenant's experiments, as `who` may read them (the policy first). The console reads them so too. */
export async function readExperiments(engine: Engine, who: Authenticated) {
  await engine.authorize(who, "resource.read", experimentsUrn(who.caller.tenant));
  return listExperiments(engine.deps.state, who.caller.tenant);
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

export function createEvalRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get("/v1/evals/experiments", async (c) =>
    c.json({ experiments: await readExperiments(engine, c.get("who")) }),
  );

  app.get("/v1/evals/experiments/:id", async (c) =>
    c.json({ experiment: await readExperiment(engine, c.get("who"), c.req.param("id")) }),
  );

  return app;
}
