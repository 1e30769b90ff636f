import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as z from "zod";
import { DOCUMENT_LIMITS } from "../../domain/documents.ts";
import { formatIssues } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { ConfigError, ValidationError } from "../../kernel/errors.ts";
import {
  addDocument,
  deleteDocument,
  documentUrn,
  getDocument,
  listDocuments,
} from "../../knowledge/documents.ts";
import { fetchDocument } from "../../knowledge/fetch-document.ts";
import { principalOf, ResourceAccess } from "../../store/resource-access.ts";
import { type ApiEnv, errorBody, ownUrn } from "./http-kit.ts";

/**
 * The tenant's documents over the HTTP API (mounted in http-api.ts, behind its key and rate
 * limit; shared/knowledge/documents.ts does the work). Adding, listing and deleting are writes and
 * reads of `doc.Document` resources: the policy decides (by default the tenant's admins).
 *
 *   POST   /v1/documents?name=<file name>   the document's bytes as the body, its Content-Type
 *                                           (text/markdown, text/plain, text/html, application/pdf)
 *   POST   /v1/documents                    {"url": "https://...", "name"?: "..."} (JSON): fetched
 *                                           through the outbound guard
 *     -> 202 {urn, status: "pending", unchanged, links: {document}}   (200 when unchanged)
 *   GET    /v1/documents?cursor=            -> 200 {documents: [...], cursor?}
 *   GET    /v1/documents/:urn               -> 200 the document's state: pending, processing (with
 *                                           chunks/embedded), ready, failed (with error)
 *   DELETE /v1/documents/:urn               -> 204: its chunks, vectors and bytes removed
 */
const UrlBody = z
  .object({
    url: z.string().min(1).max(2_000),
    name: z.string().min(1).max(DOCUMENT_LIMITS.nameChars).optional(),
  })
  .strict();
const ListQuery = z
  .object({
    cursor: z.string().min(1).max(2_000).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(100),
  })
  .strict();

export const documentPath = (urn: string) => `/v1/documents/${encodeURIComponent(urn)}`;

export function createDocumentRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  let access: ResourceAccess | undefined;
  const may = (
    c: { get(k: "who"): ApiEnv["Variables"]["who"] },
    action: "resource.read" | "resource.write",
    urn: string,
  ) => {
    const { actor, caller } = c.get("who");
    access ??= new ResourceAccess(engine.deps.resources, engine.deps.policy);
    return access.authorize(principalOf(actor, caller, caller.tenant), action, urn);
  };

  app.post(
    "/v1/documents",
    bodyLimit({
      // The document, and a little more: a JSON body or a file's bytes.
      maxSize: DOCUMENT_LIMITS.bytes + 4096,
      onError: (c) => {
        c.header("Connection", "close");
        return c.json(
          errorBody(
            "TOO_LARGE",
            `The document is larger than ${DOCUMENT_LIMITS.bytes} bytes (4 MB), the most one may have: split it into parts`,
          ),
          413,
        );
      },
    }),
    async (c) => {
      const { actor, caller } = c.get("who");
      const type = c.req.header("content-type") ?? "";
      let name: string;
      let bytes: Uint8Array;
      let contentType: string | undefined;
      if (/^application\/json\b/i.test(type)) {
        const text = await c.req.text();
        let raw: unknown;
        try {
          raw = JSON.parse(text);
        } catch (e) {
          throw new ValidationError(`The request body is not valid JSON (${(e as Error).message})`);
        }
        const body = UrlBody.safeParse(raw);
        if (!body.success)
          throw new ValidationError("The request body is not valid", formatIssues(body.error));
        name = body.data.name ?? body.data.url;
        await may(c, "resource.write", documentUrn(caller.tenant, name));
        const fetchImpl = engine.deps.outboundFetch;
        if (!fetchImpl) throw new ConfigError("This Arbor fetches no URL: send the document's bytes instead");
        ({ bytes, contentType } = await fetchDocument(fetchImpl, body.data.url));
      } else {
        const given = c.req.query("name");
        if (!given)
          throw new ValidationError(
            "Say the document's name: POST /v1/documents?name=<file name>, with its bytes as the body and its Content-Type",
          );
        name = given;
        await may(c, "resource.write", documentUrn(caller.tenant, name));
        bytes = new Uint8Array(await c.req.arrayBuffer());
        contentType = type || undefined;
      }
      const added = await addDocument(engine.deps, {
        tenant: caller.tenant,
        actor: actor.id,
        name,
        bytes,
        ...(contentType ? { contentType } : {}),
      });
      await engine.deps.untilDurable();
      const document = documentPath(added.urn);
      c.header("Location", document);
      return c.json({ ...added, links: { document } }, added.unchanged ? 200 : 202);
    },
  );

  app.get("/v1/documents", async (c) => {
    const { caller } = c.get("who");
    const q = ListQuery.safeParse(c.req.query());
    if (!q.success) throw new ValidationError("The query is not valid", formatIssues(q.error));
    // Listing reads every document of the tenant: as reading the tenant's documents.
    await may(c, "resource.read", documentUrn(caller.tenant, "(list)"));
    return c.json(
      await listDocuments(engine.deps, caller.tenant, {
        limit: q.data.limit,
        ...(q.data.cursor ? { cursor: q.data.cursor } : {}),
      }),
    );
  });

  app.get("/v1/documents/:urn", async (c) => {
    const urn = ownUrn(c, "Document", c.req.param("urn"));
    await may(c, "resource.read", urn);
    return c.json(await getDocument(engine.deps, c.get("who").caller.tenant, urn));
  });

  app.delete("/v1/documents/:urn", async (c) => {
    const urn = ownUrn(c, "Document", c.req.param("urn"));
    await may(c, "resource.write", urn);
    await deleteDocument(engine.deps, c.get("who").caller.tenant, urn);
    await engine.deps.untilDurable();
    return c.body(null, 204);
  });

  return app;
}
