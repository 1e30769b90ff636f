import { createHmac, randomBytes } from "node:crypto";
import { ConflictError } from "../errors.ts";
import type { StateStore } from "../ports/state-store.ts";

/**
 * HTTP callbacks are signed (Stripe/Slack style) with a per-tenant secret kept in the state store.
 * How to drive it:
 *
 *   const secrets = await signingSecrets(state, tenant, clock);     // created on first need
 *   headers["Arbor-Signature"] = signatureHeader(secrets, rawBody, now);
 *   await rotateSigningSecret(state, tenant, clock);                // admin: a new one, the old kept a while
 *
 * The header is `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, the key being the
 * secret string as UTF-8 (`whsec_...`). After a rotation, for ROTATION_GRACE_MS, a second `v1=`
 * signed with the previous secret follows the first, so a receiver that still holds the old secret
 * keeps verifying until it fetches the new one (GET /v1/callbacks/secret). Receivers check: the
 * timestamp within 300 s of their clock, any v1 equal (constant time) to their own HMAC, and the
 * body's `id` not seen before (README, "HTTP callbacks").
 *
 * Record `notify-secret#<tenant>` (kind `notify-secret`), first written with expectedVersion 0, so
 * two processes creating it at once end up with the same secret.
 */
export const SECRET_KIND = "notify-secret";
export const secretKey = (tenant: string) => `notify-secret#${tenant}`;
export const ROTATION_GRACE_MS = 24 * 60 * 60_000;
export const SIGNATURE_HEADER = "Arbor-Signature";

export interface SigningSecrets {
  current: { secret: string; createdAt: string };
  /** The secret before the last rotation, still signed with until `until`. */
  previous?: { secret: string; until: string };
}

export const newSigningSecret = () => `whsec_${randomBytes(32).toString("base64url")}`;

/** The tenant's secrets, the current one created (a conditional write) when there is none. */
export async function signingSecrets(
  state: StateStore,
  tenant: string,
  clock: () => Date,
): Promise<SigningSecrets> {
  const existing = await state.get<SigningSecrets>(secretKey(tenant));
  if (existing) return existing.data;
  const data: SigningSecrets = { current: { secret: newSigningSecret(), createdAt: clock().toISOString() } };
  try {
    await state.transact([
      {
        op: "put",
        record: { key: secretKey(tenant), kind: SECRET_KIND, updatedAt: data.current.createdAt, data },
        expectedVersion: 0,
      },
    ]);
    return data;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    const won = await state.get<SigningSecrets>(secretKey(tenant));
    if (!won) throw e;
    return won.data;
  }
}

/** A new current secret; the old one is still signed with for ROTATION_GRACE_MS. */
export async function rotateSigningSecret(
  state: StateStore,
  tenant: string,
  clock: () => Date,
): Promise<SigningSecrets> {
  await signingSecrets(state, tenant, clock);
  for (let attempt = 0; ; attempt++) {
    const current = await state.get<SigningSecrets>(secretKey(tenant));
    if (!current) throw new Error(`The signing secret of ${tenant} vanished while it was rotated`);
    const now = clock();
    const data: SigningSecrets = {
      current: { secret: newSigningSecret(), createdAt: now.toISOString() },
      previous: {
        secret: current.data.current.secret,
        until: new Date(now.getTime() + ROTATION_GRACE_MS).toISOString(),
      },
    };
    try {
      await state.transact([
        {
          op: "put",
          record: { key: secretKey(tenant), kind: SECRET_KIND, updatedAt: now.toISOString(), data },
          expectedVersion: current.version,
        },
      ]);
      return data;
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= 5) throw e;
    }
  }
}

export const hmacHex = (secret: string, t: number, body: string) =>
  createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");

/** `t=<unix>,v1=<hex>` (and a second v1 with the previous secret during a rotation's grace). */
export function signatureHeader(secrets: SigningSecrets, body: string, now: Date): string {
  const t = Math.floor(now.getTime() / 1000);
  const parts = [`t=${t}`, `v1=${hmacHex(secrets.current.secret, t, body)}`];
  if (secrets.previous && Date.parse(secrets.previous.until) > now.getTime())
    parts.push(`v1=${hmacHex(secrets.previous.secret, t, body)}`);
  return parts.join(",");
}
