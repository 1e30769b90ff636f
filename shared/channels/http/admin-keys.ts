import { type Context, Hono } from "hono";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { ValidationError } from "../../kernel/errors.ts";
import {
  type ApiKeyEntry,
  ApiKeySchema,
  fingerprintOf,
  type KeyStore,
  keysToRevoke,
  newApiKey,
  newKeyProblem,
} from "../../ports/key-store.ts";
import { type ApiEnv, asker, readJson } from "./http-kit.ts";

/**
 * The API keys of the caller's tenant, for its admins (mounted by the HTTP API at /v1/admin/keys,
 * behind its key check, rate limit and body limit):
 *
 *   POST   /v1/admin/keys            {id, kind?, tenant?, roles?, name?}  -> 201 {key, ...}: the key, shown this once
 *   GET    /v1/admin/keys                                          -> 200 {keys: [...]}: fingerprints, never keys
 *   DELETE /v1/admin/keys/:which     an id (all its keys) or a fingerprint -> 200 {revoked: [...]}
 *
 * Who may is the policy's call (engine.authorize): writing `cld:common.Tenant.<t>/common.ApiKey.<fingerprint>`,
 * or reading `.../common.ApiKey.list`, has no owner, so the default policy allows it to the tenant's
 * admins (`--role admin` persons) only; anyone else gets 403 before anything is read or written.
 * A key is only ever made for the caller's own tenant (another tenant is 403, by the tenant
 * boundary). Locally the keys file is rewritten (0600) and a running server takes it at once; on
 * AWS the state table is written, and other instances see it within their cache's TTL.
 */
export const ADMIN_HELP =
  "Admin routes need an admin key of that tenant: `arbor keys add --id user_<name> --role admin` (on AWS with ARBOR_MODE=aws and ARBOR_TABLE_NAME set)";

const CreateKeySchema = z
  .object({
    id: z.string().min(1).max(110),
    kind: z.enum(["human", "agent"]).optional(),
    tenant: z.string().min(1).max(64).optional(),
    roles: z.array(z.string().min(1).max(64)).max(50).optional(),
    name: z.string().max(200).optional(),
  })
  .strict();

/** What the policy is asked about: a key by its fingerprint, or `list`, the tenant's keys. */
export const keysUrn = (tenant: string, what: string) => `cld:common.Tenant.${tenant}/common.ApiKey.${what}`;

/** A key as the admin routes show it: who it stands for and its fingerprint, never the key or its hash. */
export const keyView = (k: ApiKeyEntry) => ({
  fingerprint: fingerprintOf(k),
  id: k.id,
  kind: k.kind,
  tenant: k.tenant,
  roles: k.roles,
  ...(k.name ? { name: k.name } : {}),
});

export function adminKeyRoutes({ engine, keys }: { engine: Engine; keys: KeyStore }): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  const tenantOf = (c: Context<ApiEnv>) => c.get("who").caller.tenant;

  app.post("/", async (c) => {
    const req = await readJson(c, CreateKeySchema);
    const tenant = req.tenant ?? tenantOf(c);
    const kind = req.kind ?? (req.id.startsWith("agent_") ? "agent" : "human");
    const { key, entry } = newApiKey({
      id: req.id,
      kind,
      tenant,
      roles: req.roles ?? [],
      ...(req.name === undefined ? {} : { name: req.name }),
    });
    // Checked before the policy is asked: a bad tenant is no URN to ask about.
    const checked = checkEntry(entry);
    await engine.authorize(asker(c), "resource.write", keysUrn(tenant, fingerprintOf(checked)));
    await keys.add(checked);
    c.header("Cache-Control", "no-store");
    return c.json({ key, ...keyView(checked) }, 201);
  });

  app.get("/", async (c) => {
    const tenant = tenantOf(c);
    await engine.authorize(asker(c), "resource.read", keysUrn(tenant, "list"));
    return c.json({ keys: (await keys.list(tenant)).map(keyView) });
  });

  app.delete("/:which", async (c) => {
    const tenant = tenantOf(c);
    const which = c.req.param("which");
    const who = asker(c);
    // Who may see the tenant's keys first: nobody else learns which exist.
    await engine.authorize(who, "resource.read", keysUrn(tenant, "list"));
    for (const k of keysToRevoke(await keys.list(tenant), which, tenant, `tenant ${tenant}`))
      await engine.authorize(who, "resource.write", keysUrn(tenant, fingerprintOf(k)));
    const revoked = await keys.revoke(which, tenant);
    return c.json({ revoked: revoked.map(keyView) });
  });

  return app;
}

/** The entry as the key stores check it; ValidationError naming each bad field. */
function checkEntry(entry: ApiKeyEntry): ApiKeyEntry {
  const parsed = ApiKeySchema.safeParse(entry);
  const problem = parsed.success ? newKeyProblem(parsed.data) : undefined;
  if (problem) throw new ValidationError(problem);
  if (parsed.success) return parsed.data;
  throw new ValidationError("The key cannot be made", formatIssues(parsed.error));
}
