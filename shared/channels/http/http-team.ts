import { Hono } from "hono";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import { teamEntryOf } from "../../domain/team.ts";
import type { Engine } from "../../engine/engine.ts";
import { teamUrn } from "../../engine/team.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { type ApiEnv, asker, readJson } from "./http-kit.ts";

/**
 * The tenant's team over the HTTP API (mounted in http-api.ts, behind its key, rate limit and
 * 256 KB body bound). The caller's tenant is the key's; the policy decides who may (by default the
 * tenant's admins: a write of `cld:common.Tenant.<t>/common.Assistant.*`, which has no owner):
 *
 *   GET /v1/admin/team                  the team as a team file        -> 200 {team, assistants}
 *   PUT /v1/admin/team[?dryRun=true]    a team file (shared/domain/team.ts): what applying it
 *                                       changes, and unless dryRun, applied -> 200 {diff, applied}
 */
const PutQuery = z.object({ dryRun: z.enum(["true", "false", "1", "0"]).optional() }).strict();

export function createTeamRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get("/v1/admin/team", async (c) => {
    const { tenant } = c.get("who").caller;
    const assistants = await engine.team(tenant, asker(c));
    return c.json({
      tenant,
      team: { assistants: assistants.map(teamEntryOf) },
      assistants: assistants.map((a) => ({ urn: a.meta.id, name: a.meta.name })),
    });
  });

  app.put("/v1/admin/team", async (c) => {
    const { tenant } = c.get("who").caller;
    const q = PutQuery.safeParse(c.req.query());
    if (!q.success) throw new ValidationError("The query is not valid", formatIssues(q.error));
    const dryRun = q.data.dryRun === "true" || q.data.dryRun === "1";
    // Who may, before the body is read: a non-admin's file is refused whatever it holds.
    await engine.authorize(asker(c), "resource.write", teamUrn(tenant));
    // The schema is the engine's (against its tool registry); here only JSON, bounded above.
    const raw = await readJson(c, z.unknown());
    const diff = await engine.applyTeam(tenant, raw, { dryRun, asker: asker(c) });
    return c.json({ tenant, diff, applied: !dryRun });
  });

  return app;
}
