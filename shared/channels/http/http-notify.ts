import { createHash } from "node:crypto";
import { type Context, Hono } from "hono";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { DELIVERY_STATUSES, deliveryView } from "../../notify/deliveries.ts";
import type { NotifyService } from "../../notify/service.ts";
import { ARBOR_SIGNATURE_UNTIL, type SigningSecrets } from "../../notify/signing.ts";
import { type ApiEnv, asker, readJson } from "./http-kit.ts";

/**
 * The HTTP API's routes of the notify path (mounted by the HTTP API behind its key check, rate
 * limit and body limit):
 *
 *   GET  /v1/callbacks/secret                   the caller's own callback signing secret(s): it signs the
 *                                               callbacks this key asks for, and only this key sees it -> 200
 *   POST /v1/callbacks/secret/rotate            a new secret for the caller's key; the old one signs along for 24 h -> 200
 *   GET  /v1/admin/callbacks/secret             the tenant's secret, which signs callbacks recorded before
 *                                               secrets were per key (admins) -> 200
 *   POST /v1/admin/callbacks/secret/rotate      {principal?}: a new secret for a key, or the tenant's (admins) -> 200
 *   GET  /v1/admin/deliveries?status=dead       the tenant's deliveries in a status (admins)  -> 200
 *   POST /v1/admin/deliveries/:id/redrive       a dead delivery sent again (admins)            -> 200
 *   POST /v1/admin/deliveries/redrive           {all: true}: every dead delivery of the tenant (admins) -> 200
 *
 * Every route asks the policy (engine.authorize). A key's secret is
 * `cld:common.Tenant.<t>/notify.CallbackSecret.<hash of the key's actor id>`, owned by that actor:
 * the default policy shows it to its owner and the tenant's admins, never to an assistant or another
 * key. The tenant's secret (`.../notify.CallbackSecret.tenant`) and the deliveries
 * (`.../notify.Delivery.<id|list>`) have no owner: admins only. Another tenant's delivery is one
 * that does not exist (404).
 */
const StatusQuery = z
  .object({
    status: z.enum(DELIVERY_STATUSES as [string, ...string[]]).default("dead"),
    limit: z.coerce.number().int().min(1).max(500).default(100),
    cursor: z.string().min(1).max(2000).optional(),
  })
  .strict();
const RedriveAll = z.object({ all: z.literal(true) }).strict();
const RotateBody = z.object({ principal: z.string().min(1).max(200).optional() }).strict();

/** The signature a receiver checks, as the secret routes describe it. */
const SIGNATURE = {
  scheme: "Standard Webhooks (https://www.standardwebhooks.com): verify with its library for your language",
  headers: ["webhook-id", "webhook-timestamp", "webhook-signature"],
  deprecated: `Arbor-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>"> (until ${ARBOR_SIGNATURE_UNTIL})`,
};

export const notifyUrn = (tenant: string, type: string, id: string) =>
  `cld:common.Tenant.${tenant}/notify.${type}.${id}`;
/** A key's callback secret as the policy sees it (an actor id may hold characters a URN does not). */
const secretUrn = (tenant: string, actorId: string) =>
  notifyUrn(tenant, "CallbackSecret", createHash("sha256").update(actorId).digest("hex").slice(0, 32));
const secretView = (secrets: SigningSecrets) => ({
  secret: secrets.current.secret,
  createdAt: secrets.current.createdAt,
  previousValidUntil: secrets.previous?.until ?? null,
  signature: SIGNATURE,
});

export function notifyRoutes({ engine, notify }: { engine: Engine; notify: NotifyService }): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const tenantOf = (c: Context<ApiEnv>) => c.get("who").caller.tenant;

  /**
   * One secret's route: the policy asked about it (a key's, owned by that key; or the tenant's,
   * no owner), then `act` reads or rotates it, and the secret is answered once it is on disk.
   */
  const secretRoute = async (
    c: Context<ApiEnv>,
    action: "resource.read" | "resource.write",
    signer: string | undefined,
    act: (tenant: string) => Promise<SigningSecrets>,
    extra: Record<string, string> = {},
  ) => {
    const tenant = tenantOf(c);
    if (signer === undefined)
      await engine.authorize(asker(c), action, notifyUrn(tenant, "CallbackSecret", "tenant"));
    else await engine.authorize(asker(c), action, secretUrn(tenant, signer), { owner: signer });
    const secrets = await act(tenant);
    await engine.deps.untilDurable();
    c.header("Cache-Control", "no-store");
    return c.json({ ...extra, ...secretView(secrets) });
  };
  const me = (c: Context<ApiEnv>) => c.get("who").actor.id;

  app.get("/v1/callbacks/secret", (c) =>
    secretRoute(c, "resource.read", me(c), (tenant) => notify.callbackSecrets(tenant, me(c))),
  );
  app.post("/v1/callbacks/secret/rotate", (c) =>
    secretRoute(c, "resource.write", me(c), (tenant) => notify.rotateCallbackSecret(tenant, me(c))),
  );
  app.get("/v1/admin/callbacks/secret", (c) =>
    secretRoute(c, "resource.read", undefined, (tenant) => notify.callbackSecrets(tenant)),
  );
  app.post("/v1/admin/callbacks/secret/rotate", async (c) => {
    const { principal } = await readJson(c, RotateBody);
    return secretRoute(
      c,
      "resource.write",
      principal,
      (tenant) => notify.rotateCallbackSecret(tenant, principal),
      principal ? { principal } : {},
    );
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
