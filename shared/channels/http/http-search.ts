import { Hono } from "hono";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { placeOf, SEARCH_KINDS, type SearchKind, searchKnowledge } from "../../knowledge/search.ts";
import { principalOf, ResourceAccess } from "../../store/resource-access.ts";
import type { ApiEnv } from "./http-kit.ts";

/**
 * Search over what the caller's tenant knows, by meaning, as an assistant's `search_resources`
 * does (shared/knowledge/search.ts), for a person or a platform engineer checking what the
 * assistants will find (mounted in http-api.ts, behind its key and rate limit):
 *
 *   GET /v1/search?q=<question>[&kinds=doc.Chunk,common.Message,...][&limit=10]
 *     -> 200 {results: [{urn, kind, score, text, document?, page?, headings?, place?}]}
 *
 * What the caller may not read is left out (the policy decides each result, as for a read). By
 * the default policy a person finds the tenant's tools and their own requests, conversations and
 * tasks; an admin the tenant's passages and tasks too. Requests and conversations are only ever
 * the caller's own.
 */
const KIND_LIST = z
  .string()
  .max(200)
  .transform((s) => s.split(",").map((k) => k.trim()))
  .pipe(z.array(z.enum(SEARCH_KINDS)).min(1).max(SEARCH_KINDS.length));
const SearchQuery = z
  .object({
    q: z.string().trim().min(1).max(2_000),
    kinds: KIND_LIST.optional(),
    limit: z.coerce.number().int().min(1).max(50).default(10),
  })
  .strict();
/** The most of a result's text an answer carries. */
const TEXT_CHARS = 1_000;

export function createSearchRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get("/v1/search", async (c) => {
    const q = SearchQuery.safeParse(c.req.query());
    if (!q.success)
      throw new ValidationError(
        `The search is not valid: give ?q=<question>, and optionally kinds (some of ${SEARCH_KINDS.join(", ")}) and limit (1-50)`,
        formatIssues(q.error),
      );
    const { actor, caller } = c.get("who");
    const found = await searchKnowledge(engine.deps, {
      tenant: caller.tenant,
      text: q.data.q,
      ...(q.data.kinds ? { kinds: q.data.kinds as SearchKind[] } : {}),
      limit: q.data.limit,
      person: actor.id,
    });
    const readable = await new ResourceAccess(engine.deps.resources, engine.deps.policy).readable(
      principalOf(actor, caller, caller.tenant),
      found.map((f) => f.urn),
    );
    return c.json({
      results: found
        .filter((f) => readable.has(f.urn))
        .map((f) => ({
          urn: f.urn,
          kind: f.kind,
          score: Number(f.score.toFixed(4)),
          text: f.text.length > TEXT_CHARS ? `${f.text.slice(0, TEXT_CHARS)}…` : f.text,
          ...(f.document ? { document: f.document, place: placeOf(f) } : {}),
          ...(f.page !== undefined ? { page: f.page } : {}),
          ...(f.headings ? { headings: f.headings } : {}),
        })),
    });
  });

  return app;
}
