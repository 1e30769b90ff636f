import { Hono } from "hono";
import type { Engine } from "../../engine/engine.ts";
import { ConfigError, NotFoundError } from "../../kernel/errors.ts";
import type { ArtifactInfo } from "../../ports/artifact-store.ts";
import { principalOf, ResourceAccess } from "../../store/resource-access.ts";
import { type ApiEnv, asker, ownUrn } from "./http-kit.ts";

/**
 * The files tasks made (the create_artifact built-in's), over the HTTP API (mounted in
 * http-api.ts, behind its key and rate limit). Read as the task is: by who may read the task.
 *
 *   GET /v1/tasks/:urn/artifacts   -> 200 {artifacts: [{urn, name, contentType, size, sha256, createdAt, links: {download}}]}
 *                                     (a request's root lists every file of its tree)
 *   GET /v1/artifacts/:urn         -> 200 the bytes, as an attachment of their type
 *
 * A download is never rendered on the API's origin (the console's too): it is an attachment,
 * sandboxed by its Content-Security-Policy and not sniffed, so an HTML file an agent made cannot
 * run as the console's page.
 */
export const artifactPath = (urn: string) => `/v1/artifacts/${encodeURIComponent(urn)}`;

const withLinks = (info: ArtifactInfo) => ({ ...info, links: { download: artifactPath(info.urn) } });

export function createArtifactRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const store = () => {
    const artifacts = engine.deps.artifacts;
    if (!artifacts) throw new ConfigError("This Arbor keeps no artifacts");
    return artifacts;
  };

  app.get("/v1/tasks/:urn/artifacts", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    const { view } = await engine.result(urn, asker(c)); // the task's reader only (ForbiddenError otherwise)
    if (!view) throw new NotFoundError("Task", urn);
    const own = view.artifacts ?? (await store().listByTask(urn)).map((a) => a.urn);
    const infos = await Promise.all(own.map((a) => store().describe(a)));
    return c.json({ artifacts: infos.flatMap((i) => (i ? [withLinks(i)] : [])) });
  });

  app.get("/v1/artifacts/:urn", async (c) => {
    const urn = ownUrn(c, "Artifact", c.req.param("urn"));
    const { actor, caller } = c.get("who");
    await new ResourceAccess(engine.deps.resources, engine.deps.policy).authorize(
      principalOf(actor, caller, caller.tenant),
      "resource.read",
      urn,
    );
    const found = await store().get(urn);
    if (!found) throw new NotFoundError("Artifact", urn);
    const { info, body } = found;
    return c.body(body as Uint8Array<ArrayBuffer>, 200, {
      "Content-Type": info.contentType,
      "Content-Length": String(body.byteLength),
      "Content-Disposition": `attachment; filename*=UTF-8''${encodeURIComponent(info.name)}`,
      "Content-Security-Policy": "sandbox; default-src 'none'",
      "X-Content-Type-Options": "nosniff",
      ETag: `"${info.sha256}"`,
      "Cache-Control": "private, no-store",
    });
  });

  return app;
}
