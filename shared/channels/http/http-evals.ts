import { Hono } from "hono";
import type { Engine } from "../../engine/engine.ts";
import { listExperiments, loadExperiment } from "../../evals/experiment.ts";
import { NotFoundError } from "../../kernel/errors.ts";
import { type ApiEnv, asker } from "./http-kit.ts";

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

export function createEvalRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get("/v1/evals/experiments", async (c) => {
    const { tenant } = c.get("who").caller;
    await engine.authorize(asker(c), "resource.read", experimentsUrn(tenant));
    return c.json({ experiments: await listExperiments(engine.deps.state, tenant) });
  });

  app.get("/v1/evals/experiments/:id", async (c) => {
    const { tenant } = c.get("who").caller;
    const id = c.req.param("id");
    await engine.authorize(asker(c), "resource.read", experimentsUrn(tenant));
    const experiment = /^[0-9A-Za-z]{4,40}$/.test(id)
      ? await loadExperiment(engine.deps.state, tenant, id)
      : undefined;
    if (!experiment) throw new NotFoundError("Experiment", id);
    return c.json({ experiment });
  });

  return app;
}
