import { type Context, Hono } from "hono";
import { z } from "zod";
import { formatIssues } from "../domain/resources.ts";
import type { Engine } from "../engine/engine.ts";
import { NotFoundError, ValidationError } from "../errors.ts";
import { DELIVERY_STATUSES, deliveryView } from "../notify/deliveries.ts";
import type { NotifyService } from "../notify/service.ts";
import { type ApiEnv, asker, readJson } from "./http-api.ts";

/**
 * The HTTP API's routes of the notify path (mounted by the HTTP API behind its key check, rate
 * limit and body limit):
 *
 *   GET  /v1/callbacks/secret                   the tenant's callback signing secret(s), any key of the tenant -> 200
 *   POST /v1/admin/callbacks/secret/rotate      a new secret; the old one signs along for 24 h (admins) -> 200
 *   GET  /v1/admin/deliveries?status=dead       the tenant's deliveries in a status (admins)  -> 200
 *   POST /v1/admin/deliveries/:id/redrive       a dead delivery sent again (admins)            -> 200
 *   POST /v1/admin/deliveries/redrive           {all: true}: every dead delivery of the tenant (admins) -> 200
 *
 * Admin routes ask the policy (engine.authorize) about `cld:common.Tenant.<t>/notify.Delivery.<id|list>`
 * and `.../notify.CallbackSecret.current`: no owner, so the default policy allows them to the
 * tenant's admins only. Another tenant's delivery is one that does not exist (404).
 */
const StatusQuery = z
  .object({
    status: z.enum(DELIVERY_STATUSES as [string, ...string[]]).default("dead"),
    limit: z.coerce.number().int().min(1).max(500).default(100),
    cursor: z.string().min(1).max(2000).optional(),
  })
  .strict();
const RedriveAll = z.object({ all: z.literal(true) }).strict();

const notifyUrn = (tenant: string, type: string, id: string) =>
  `cld:common.Tenant.${tenant}/notify.${type}.${id}`;

export function notifyRoutes({ engine, notify }: { engine: Engine; notify: NotifyService }): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const tenantOf = (c: Context<ApiEnv>) => c.get("who").caller.tenant;

  app.get("/v1/callbacks/secret", async (c) => {
    const secrets = await notify.callbackSecrets(tenantOf(c));
    c.header("Cache-Control", "no-store");
    return c.json({
      secret: secrets.current.secret,
      createdAt: secrets.current.createdAt,
      ...(secrets.previous ? { previous: secrets.previous } : {}),
      header: 'Arbor-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">',
    });
  });

  app.post("/v1/admin/callbacks/secret/rotate", async (c) => {
    const tenant = tenantOf(c);
    await engine.authorize(asker(c), "resource.write", notifyUrn(tenant, "CallbackSecret", "current"));
    const secrets = await notify.rotateCallbackSecret(tenant);
    await engine.deps.untilDurable();
    c.header("Cache-Control", "no-store");
    return c.json({
      secret: secrets.current.secret,
      createdAt: secrets.current.createdAt,
      previousValidUntil: secrets.previous?.until ?? null,
    });
  });

  app.get("/v1/admin/deliveries", async (c) => {
    const tenant = tenantOf(c);
    await engine.authorize(asker(c), "resource.read", notifyUrn(tenant, "Delivery", "list"));
    const query = StatusQuery.safeParse(c.req.query());
    if (!query.success) throw new ValidationError("The query is not valid", formatIssues(query.error));
    const { status, limit, cursor } = query.data;
    const page = await notify.deliveries(status as (typeof DELIVERY_STATUSES)[number], {
      tenant,
      limit,
      ...(cursor ? { cursor } : {}),
    });
    return c.json({ deliveries: page.items.map(deliveryView), cursor: page.cursor ?? null });
  });

  app.post("/v1/admin/deliveries/redrive", async (c) => {
    const tenant = tenantOf(c);
    await readJson(c, RedriveAll);
    await engine.authorize(asker(c), "resource.write", notifyUrn(tenant, "Delivery", "list"));
    const redriven = await notify.redriveAll(tenant);
    await engine.deps.untilDurable();
    return c.json({ redriven });
  });

  app.post("/v1/admin/deliveries/:id/redrive", async (c) => {
    const tenant = tenantOf(c);
    const id = c.req.param("id");
    if (!/^dlv_[A-Za-z0-9_-]{1,64}$/.test(id)) throw new NotFoundError("Delivery", id);
    await engine.authorize(asker(c), "resource.write", notifyUrn(tenant, "Delivery", id));
    const found = await notify.delivery(id);
    if (!found || found.data.tenant !== tenant) throw new NotFoundError("Delivery", id);
    const redriven = await notify.redrive(id);
    await engine.deps.untilDurable();
    return c.json({ delivery: deliveryView(redriven) });
  });

  return app;
}
