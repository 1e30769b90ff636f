import { Hono } from "hono";
import { tenantUrn, type Urn } from "../../domain/urn.ts";
import type { Engine } from "../../engine/engine.ts";
import { ValidationError } from "../../kernel/errors.ts";
import type { ToolDescriptor } from "../../ports/tools.ts";
import { checkNamespace, storedTools, TOOL_TYPE, toolUrn } from "../../tools/service/tool-registry.ts";
import { type ApiEnv, asker } from "./http-kit.ts";

/**
 * ListTools over the HTTP API (mounted in http-api.ts, behind its key, rate limit and body bound):
 *
 *   GET /v1/tools[?namespace=<ns>]   the caller's tenant's Tool resources, of one namespace or all
 *                                    -> 200 {tenant, namespace, tools: [{name, namespace, kind, ...}]}
 *
 * The tenant is the key's. A namespace that is not one (tools/service/config.ts NAMESPACE) is a 400 that
 * says what one may be, before anything is read. Then the policy decides, as a read of the
 * tenant's tool resources (`<tenant>/common.Tool.registry`: the default policy lets anyone of the
 * tenant read its tools; they hold no settings). The list comes from the stored resources, through
 * the tool port's ListTools (locally the tool service; on AWS the tool function, which holds the
 * configuration and registers the tenant's tools first if need be).
 */
export const toolsUrn = (tenant: string): Urn => `${tenantUrn(tenant)}/${TOOL_TYPE}.registry` as Urn;

export function createToolRoutes(engine: Engine): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  app.get("/v1/tools", async (c) => {
    const { tenant } = c.get("who").caller;
    const unknown = Object.keys(c.req.queries()).filter((k) => k !== "namespace");
    if (unknown.length > 0)
      throw new ValidationError(`GET /v1/tools takes only ?namespace=<ns>, not ${unknown.join(", ")}`);
    const given = c.req.queries("namespace") ?? [];
    if (given.length > 1) throw new ValidationError("Give one namespace (?namespace=<ns>), or none for all");
    const namespace = checkNamespace(given[0]);
    await engine.authorize(asker(c), "resource.read", toolsUrn(tenant));
    const tools = engine.deps.tools;
    const options = namespace !== undefined ? { namespace } : {};
    const listed = tools.listTools
      ? await tools.listTools(tenant, options)
      : await storedTools(engine.deps.resources, tenant, namespace);
    return c.json({ tenant, namespace: namespace ?? null, tools: listed.map((d) => shown(tenant, d)) });
  });

  return app;
}

const shown = (tenant: string, d: ToolDescriptor) => ({
  name: d.name,
  namespace: d.namespace ?? d.kind,
  kind: d.kind,
  description: d.description,
  parameters: d.parameters,
  risky: d.risky,
  urn: toolUrn(tenant, d.name),
});
