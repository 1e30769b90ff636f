import { Hono } from "hono";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { authorizeGraph } from "../../graph/graph-access.ts";
import { graphStoreOf } from "../../graph/graph-of.ts";
import { GRAPH_LIMITS } from "../../graph/graph-store.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { principalOf } from "../../store/resource-access.ts";
import type { ApiEnv } from "./http-kit.ts";

/**
 * The caller's tenant's graph over the HTTP API (mounted in http-api.ts, behind its key and rate
 * limit), for people and operators; assistants use the graph tools. The tenant is the key's; the
 * policy decides `graph.read` (by default the tenant's admins):
 *
 *   GET /v1/graph?s=&p=&o=&limit=   the triples matching one pattern -> 200 {tenant, triples, more, total}
 *
 * Each of s, p, o is a term as the graph tools take it (an IRI, a prefixed name such as
 * `schema:name`, a `cld:` URN of the tenant; for o also a literal as JSON, `{"value":"Ada"}`), or
 * left out to match anything. limit: 1-100, default 100.
 */
const GraphQuery = z
  .object({
    s: z.string().min(1).max(2_100).optional(),
    p: z.string().min(1).max(2_100).optional(),
    o: z.string().min(1).max(10_000).optional(),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(GRAPH_LIMITS.resultsPerQuery)
      .default(GRAPH_LIMITS.resultsPerQuery),
  })
  .strict();

export function createGraphRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get("/v1/graph", async (c) => {
    const { actor, caller } = c.get("who");
    const q = GraphQuery.safeParse(c.req.query());
    if (!q.success) throw new ValidationError("The query is not valid", formatIssues(q.error));
    const tenant = caller.tenant;
    await authorizeGraph(engine.deps.policy, principalOf(actor, caller, tenant), "graph.read", tenant);
    return c.json({
      tenant,
      // The term parser and its RDF library load with the first graph read (graph-of.ts).
      ...(await (
        await import("../../graph/match.ts")
      ).matchTriples(graphStoreOf(engine.deps.state), tenant, q.data, q.data.limit)),
    });
  });

  return app;
}
