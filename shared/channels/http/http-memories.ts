import { Hono } from "hono";
import * as z from "zod";
import { formatIssues, MemoryScopeSchema } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { forget, listMemories, scopeUrn } from "../../knowledge/memory.ts";
import { principalOf, ResourceAccess } from "../../store/resource-access.ts";
import { type ApiEnv, ownUrn } from "./http-kit.ts";

/**
 * What assistants remembered (shared/knowledge/memory.ts), for the people it is about (mounted in
 * http-api.ts, behind its key and rate limit). The policy decides, with the person a memory is
 * about as its owner: they and the tenant's admins; the tenant's and assistants' memories, admins.
 *
 *   GET    /v1/memories                         -> 200 {memories}: those about the caller
 *   GET    /v1/memories?about=<person id>       -> those about another person (admins)
 *   GET    /v1/memories?scope=tenant            -> the tenant's (admins)
 *   GET    /v1/memories?scope=assistant&assistant=<urn>  -> an assistant's (admins)
 *   DELETE /v1/memories/:urn                    -> 204: forgotten (no later request recalls it)
 */
const ListQuery = z
  .object({
    scope: MemoryScopeSchema.default("person"),
    about: z.string().min(1).max(1000).optional(),
    assistant: z.string().min(5).max(1000).optional(),
  })
  .strict();

export function createMemoryRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const access = () => new ResourceAccess(engine.deps.resources, engine.deps.policy);

  app.get("/v1/memories", async (c) => {
    const { actor, caller } = c.get("who");
    const q = ListQuery.safeParse(c.req.query());
    if (!q.success) throw new ValidationError("The query is not valid", formatIssues(q.error));
    const { scope } = q.data;
    if (scope === "assistant" && !q.data.assistant)
      throw new ValidationError("Say whose: ?scope=assistant&assistant=<the assistant's URN>");
    const who =
      scope === "person" ? (q.data.about ?? actor.id) : scope === "assistant" ? q.data.assistant : undefined;
    // As reading one of them: the person they are about is its owner.
    const probe = `${scopeUrn(caller.tenant, scope, who)}/mem.Memory.list`;
    await access().authorize(
      principalOf(actor, caller, caller.tenant),
      "resource.read",
      probe,
      undefined,
      scope === "person" ? who : undefined,
    );
    const memories = await listMemories(engine.deps, caller.tenant, scope, who);
    return c.json({
      memories: memories.map((m) => ({
        urn: m.meta.id,
        fact: m.fact,
        scope: m.scope,
        ...(m.about ? { about: m.about } : {}),
        ...(m.assistant ? { assistant: m.assistant } : {}),
        source: m.source,
        rememberedBy: m.rememberedBy,
        createdAt: m.meta.createdAt,
      })),
    });
  });

  app.delete("/v1/memories/:urn", async (c) => {
    const urn = ownUrn(c, "Memory", c.req.param("urn"));
    const memory = await engine.deps.resources.getAs("mem.Memory", urn);
    if (!memory) throw new NotFoundError("Memory", urn);
    const { actor, caller } = c.get("who");
    await access().authorize(
      principalOf(actor, caller, caller.tenant),
      "resource.write",
      urn,
      undefined,
      memory.about,
    );
    await forget(engine.deps, urn);
    await engine.deps.untilDurable();
    return c.body(null, 204);
  });

  return app;
}
