import { createHmac, randomBytes } from "node:crypto";
import { ConflictError } from "../kernel/errors.ts";
import type { StateStore } from "../ports/state-store.ts";

/**
 * HTTP callbacks are signed with a secret kept in the state store, as the Standard Webhooks
 * specification has it (https://www.standardwebhooks.com), so a receiver verifies them with a stock
 * library. How to drive it:
 *
 *   const secrets = await signingSecrets(state, tenant, clock, signer);   // created on first need
 *   Object.assign(headers, signatureHeaders(secrets, deliveryId, rawBody, now));
 *   await rotateSigningSecret(state, tenant, clock, signer);              // a new one, the old kept a while
 *
 * Whose secret: each key (its actor id, `signer`) has its own, and signs the callbacks it asked
 * for; only that key is shown it (GET /v1/callbacks/secret), and the tenant's admins may rotate it.
 * So no key of a tenant can forge another key's callbacks. Callbacks recorded before secrets were
 * per key have no signer: the tenant's secret (record `notify-secret#<tenant>`) signs them, shown
 * to admins only (GET /v1/admin/callbacks/secret).
 *
 * Headers (a secret is `whsec_<base64 of 32 random bytes>`; the key is those bytes):
 *   webhook-id          the delivery's id (the same on every attempt: receivers deduplicate on it)
 *   webhook-timestamp   unix seconds of this attempt
 *   webhook-signature   `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<raw body>">`; after a
 *                       rotation, for ROTATION_GRACE_MS, a second one made with the previous secret
 *                       follows, space-separated, so a receiver holding the old secret keeps verifying
 *   Arbor-Signature     deprecated (until 2027-06-30): `t=<unix seconds>,v1=<hex HMAC-SHA256 of
 *                       "<t>.<raw body>">` keyed with the secret string itself, as before
 *
 * Records `notify-secret#<tenant>[#<signer>]` (kind `notify-secret`), first written with
 * expectedVersion 0, so two processes creating one at once end up with the same secret.
 */
export const SECRET_KIND = "notify-secret";
export const secretKey = (tenant: string, signer?: string) =>
  signer === undefined ? `notify-secret#${tenant}` : `notify-secret#${tenant}#${signer}`;
export const ROTATION_GRACE_MS = 24 * 60 * 60_000;
/** The deprecated header (kept until ARBOR_SIGNATURE_UNTIL; docs/webhooks.md says so). */
export const SIGNATURE_HEADER = "Arbor-Signature";
export const ARBOR_SIGNATURE_UNTIL = "2027-06-30";

export interface SigningSecrets {
  current: { secret: string; createdAt: string };
  /** The secret before the last rotation, still signed with until `until`. */
  previous?: { secret: string; until: string };
}

export const newSigningSecret = () => `whsec_${randomBytes(32).toString("base64")}`;

/** The tenant's secrets, the current one created (a conditional write) when there is none. */
export async function signingSecrets(
  state: StateStore,
  tenant: string,
  clock: () => Date,
  signer?: string,
): Promise<SigningSecrets> {
  const key = secretKey(tenant, signer);
  const existing = await state.get<SigningSecrets>(key);
  if (existing) return existing.data;
  const data: SigningSecrets = { current: { secret: newSigningSecret(), createdAt: clock().toISOString() } };
  try {
    await state.transact([
      {
        op: "put",
        record: { key, kind: SECRET_KIND, updatedAt: data.current.createdAt, data },
        expectedVersion: 0,
      },
    ]);
    return data;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    const won = await state.get<SigningSecrets>(key);
    if (!won) throw e;
    return won.data;
  }
}

/** A new current secret; the old one is still signed with for ROTATION_GRACE_MS. */
export async function rotateSigningSecret(
  state: StateStore,
  tenant: string,
  clock: () => Date,
  signer?: string,
): Promise<SigningSecrets> {
  const key = secretKey(tenant, signer);
  await signingSecrets(state, tenant, clock, signer);
  for (let attempt = 0; ; attempt++) {
    const current = await state.get<SigningSecrets>(key);
    if (!current)
      throw new ConflictError(
        `The signing secret ${key} vanished while it was rotated (removed at the same time?): rotate it again`,
        { key },
      );
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
          record: { key, kind: SECRET_KIND, updatedAt: now.toISOString(), data },
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

/** The secrets signing now: the current one, and the previous one during a rotation's grace. */
const signingNow = (secrets: SigningSecrets, now: Date): string[] =>
  secrets.previous && Date.parse(secrets.previous.until) > now.getTime()
    ? [secrets.current.secret, secrets.previous.secret]
    : [secrets.current.secret];

/** A `whsec_` secret's key bytes (base64 after the prefix; secrets made before were base64url, which Node reads too). */
const keyBytes = (secret: string) => Buffer.from(secret.replace(/^whsec_/, ""), "base64");

/** The Standard Webhooks headers of one attempt at one delivery. */
export function signatureHeaders(
  secrets: SigningSecrets,
  id: string,
  body: string,
  now: Date,
): Record<string, string> {
  const t = Math.floor(now.getTime() / 1000);
  const signatures = signingNow(secrets, now).map(
    (secret) => `v1,${createHmac("sha256", keyBytes(secret)).update(`${id}.${t}.${body}`).digest("base64")}`,
  );
  return {
    "webhook-id": id,
    "webhook-timestamp": String(t),
    "webhook-signature": signatures.join(" "),
    [SIGNATURE_HEADER]: signatureHeader(secrets, body, now),
  };
}

/** Deprecated `Arbor-Signature`: `t=<unix>,v1=<hex>` (and a second v1 with the previous secret during a rotation's grace). */
export function signatureHeader(secrets: SigningSecrets, body: string, now: Date): string {
  const t = Math.floor(now.getTime() / 1000);
  return [`t=${t}`, ...signingNow(secrets, now).map((secret) => `v1=${hmacHex(secret, t, body)}`)].join(",");
}
