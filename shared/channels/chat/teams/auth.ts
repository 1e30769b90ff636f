import { decodeProtectedHeader, importJWK, type JWK, type JWTPayload, jwtVerify } from "jose";
import { UnavailableError } from "../../../kernel/errors.ts";
import type { TeamsSettings, TeamsTenant } from "../../../notify/chat/types.ts";
import { fetchWithTimeout, readBounded } from "../../http/http-read.ts";
import { type Activity, aadTenantOf, sameServiceUrl, serviceUrlAllowed } from "./activity.ts";

/**
 * Who may talk to the Teams bot: every incoming activity's `Authorization: Bearer <JWT>` checked
 * as the Bot Framework says (bot-framework-rest-connector-authentication), before anything of the
 * activity is used. How to drive it:
 *
 *   const keys = new TeamsKeySet({ fetch, clock });          // one per process: the key cache
 *   const token = await verifyToken(header, settings, keys, clock);   // signature, alg, iss, aud, exp/nbf
 *   if (!token.ok) return c.text(token.reason, token.status);
 *   const who = checkActivity(token, activity, settings);    // serviceurl claim, allowed URLs, tenant
 *   if (!who.ok) return c.text(who.reason, who.status);      // 401, or 403 for an unconfigured tenant
 *
 * The checks: RS256 only (`none`, HS* and every other algorithm refused before a key is looked
 * up); the key by `kid` from the key set the settings' `openIdMetadataUrl` names (its `jwks_uri`),
 * cached for a day and fetched again when a token names a `kid` it lacks, at most once per
 * `refreshMs` (5 minutes) for the whole set, so tokens with made-up `kid`s cannot make Arbor fetch
 * more; a key's `endorsements`, when it has them, must name the activity's channel; the issuer one
 * of `settings.issuers`, the audience `settings.appId`, `exp` required, `exp`/`nbf` with 5 minutes
 * of clock tolerance on the injected clock; the token's `serviceurl` claim equal to the activity's
 * `serviceUrl`, which must be under one of `allowedServiceUrls`; the activity's Entra tenant one the
 * settings configure (403 otherwise).
 */
export const CLOCK_TOLERANCE_S = 300;
const KEY_SET_LIMIT = 256 * 1024;

export type AuthFailure = { ok: false; status: 401 | 403 | 503; reason: string };

interface CachedKey {
  key: Awaited<ReturnType<typeof importJWK>>;
  endorsements?: string[];
}

interface CachedSet {
  keys: Map<string, CachedKey>;
  /** When the set was last fetched successfully (ms); 0: never. */
  fetchedAt: number;
  /** When a fetch was last tried (ms), successful or not: the refresh throttle. */
  triedAt: number;
  loading?: Promise<void> | undefined;
}

export interface TeamsKeySetOptions {
  fetch: typeof fetch;
  clock: () => Date;
  /** The shortest time between two fetches of one key set for unknown kids (default 5 minutes). */
  refreshMs?: number;
  /** How long a fetched key set is used before it is fetched again (default 24 hours). */
  ttlMs?: number;
  /** How long one fetch may take (default 10 s). */
  timeoutMs?: number;
}

/** The signing keys of the OpenID metadata URLs in use, cached (see the header). */
export class TeamsKeySet {
  readonly #sets = new Map<string, CachedSet>();
  readonly #options: Required<TeamsKeySetOptions>;
  /** How many times a key set was fetched (tests and logs). */
  fetches = 0;

  constructor(options: TeamsKeySetOptions) {
    this.#options = { refreshMs: 300_000, ttlMs: 86_400_000, timeoutMs: 10_000, ...options };
  }

  /** The key `kid` of the set `metadataUrl` publishes; undefined when it has none (after at most one refresh). */
  async find(metadataUrl: string, kid: string): Promise<CachedKey | undefined> {
    const now = this.#options.clock().getTime();
    let set = this.#sets.get(metadataUrl);
    if (!set) {
      set = { keys: new Map(), fetchedAt: 0, triedAt: 0 };
      this.#sets.set(metadataUrl, set);
    }
    // A fetch in flight (a burst of activities after a cold start, or a refresh for a new kid):
    // its keys are waited for, not judged missing (a 503 or a 401 for every activity but the first).
    if (set.loading) await set.loading;
    const stale = set.fetchedAt === 0 || now - set.fetchedAt > this.#options.ttlMs;
    if (stale && now - set.triedAt >= Math.min(this.#options.refreshMs, 10_000))
      await this.#load(metadataUrl, set);
    const known = set.keys.get(kid);
    if (known || set.fetchedAt === 0) return known;
    if (now - set.triedAt >= this.#options.refreshMs) await this.#load(metadataUrl, set);
    return set.keys.get(kid);
  }

  /** Whether the set of `metadataUrl` could be fetched at least once. */
  loaded(metadataUrl: string): boolean {
    return (this.#sets.get(metadataUrl)?.fetchedAt ?? 0) > 0;
  }

  #load(metadataUrl: string, set: CachedSet): Promise<void> {
    set.loading ??= (async () => {
      set.triedAt = this.#options.clock().getTime();
      this.fetches += 1;
      try {
        const metadata = (await this.#json(metadataUrl)) as { jwks_uri?: unknown };
        if (typeof metadata.jwks_uri !== "string") return;
        const jwks = (await this.#json(metadata.jwks_uri)) as { keys?: unknown };
        if (!Array.isArray(jwks.keys)) return;
        const keys = new Map<string, CachedKey>();
        for (const jwk of jwks.keys as (JWK & { endorsements?: unknown })[]) {
          if (typeof jwk?.kid !== "string" || jwk.kty !== "RSA" || (jwk.use && jwk.use !== "sig")) continue;
          try {
            const { endorsements, ...bare } = jwk;
            const key = await importJWK(bare, "RS256");
            const endorsed = Array.isArray(endorsements)
              ? endorsements.filter((e): e is string => typeof e === "string")
              : undefined;
            keys.set(jwk.kid, { key, ...(endorsed ? { endorsements: endorsed } : {}) });
          } catch {
            // A key that does not import is skipped: the others still verify.
          }
        }
        set.keys = keys;
        set.fetchedAt = this.#options.clock().getTime();
      } catch {
        // Unreachable or malformed: the cached keys stay; the throttle holds the next try back.
      }
    })().finally(() => {
      set.loading = undefined;
    });
    return set.loading;
  }

  async #json(url: string): Promise<unknown> {
    const res = await fetchWithTimeout(
      this.#options.fetch,
      url,
      { headers: { accept: "application/json" } },
      this.#options.timeoutMs,
    );
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw new UnavailableError(
        `${url} answered ${res.status}: the signing keys cached stay until the next try`,
        {
          details: { status: res.status },
        },
      );
    }
    return JSON.parse(await readBounded(res, KEY_SET_LIMIT));
  }
}

export interface VerifiedToken {
  ok: true;
  claims: JWTPayload & { serviceurl?: unknown };
  endorsements?: string[];
}

const fail = (reason: string, status: 401 | 403 | 503 = 401): AuthFailure => ({ ok: false, status, reason });

/** Checks the bearer token's signature, algorithm, issuer, audience and times (see the header). */
export async function verifyToken(
  header: string | undefined,
  settings: TeamsSettings,
  keys: TeamsKeySet,
  clock: () => Date,
): Promise<VerifiedToken | AuthFailure> {
  const token = /^Bearer ([A-Za-z0-9_\-.]{1,16384})$/.exec(header ?? "")?.[1];
  if (!token) return fail("a Bearer token is required");
  let protectedHeader: ReturnType<typeof decodeProtectedHeader>;
  try {
    protectedHeader = decodeProtectedHeader(token);
  } catch {
    return fail("the token is not a JWT");
  }
  if (protectedHeader.alg !== "RS256")
    return fail(`the token's algorithm ${String(protectedHeader.alg)} is refused`);
  if (typeof protectedHeader.kid !== "string" || !protectedHeader.kid) return fail("the token names no key");
  const found = await keys.find(settings.openIdMetadataUrl, protectedHeader.kid);
  if (!found) {
    return keys.loaded(settings.openIdMetadataUrl)
      ? fail("the token's key is not in the published key set")
      : fail("the signing keys could not be fetched; try again", 503);
  }
  try {
    const { payload } = await jwtVerify(token, found.key, {
      algorithms: ["RS256"],
      issuer: settings.issuers,
      audience: settings.appId,
      clockTolerance: CLOCK_TOLERANCE_S,
      currentDate: clock(),
      requiredClaims: ["exp"],
    });
    return { ok: true, claims: payload, ...(found.endorsements ? { endorsements: found.endorsements } : {}) };
  } catch (error) {
    const code = (error as { code?: string }).code ?? "";
    const claim = (error as { claim?: string }).claim;
    if (code === "ERR_JWT_EXPIRED") return fail("the token has expired");
    if (code === "ERR_JWT_CLAIM_VALIDATION_FAILED")
      return fail(
        `the token's ${claim ?? "claims"} ${claim === "nbf" ? "is in the future" : "is not accepted"}`,
      );
    if (code === "ERR_JWS_SIGNATURE_VERIFICATION_FAILED")
      return fail("the token's signature does not verify");
    return fail("the token is not valid");
  }
}

export interface CheckedActivity {
  ok: true;
  aadTenantId: string;
  tenant: TeamsTenant;
}

/** Checks the activity against its token and the settings (service URL claim and prefix, tenant). */
export function checkActivity(
  token: VerifiedToken,
  activity: Activity,
  settings: TeamsSettings,
): CheckedActivity | AuthFailure {
  const claimed = token.claims.serviceurl;
  if (typeof claimed !== "string" || !sameServiceUrl(claimed, activity.serviceUrl))
    return fail("the token's service URL does not match the activity's");
  if (token.endorsements && !token.endorsements.includes(activity.channelId ?? ""))
    return fail("the token's key is not endorsed for this channel");
  if (!serviceUrlAllowed(activity.serviceUrl, settings.allowedServiceUrls))
    return fail("the activity's service URL is not an allowed one");
  const aadTenantId = aadTenantOf(activity);
  const tenant = aadTenantId ? settings.tenants[aadTenantId] : undefined;
  if (!aadTenantId || !tenant) return fail("this Microsoft Entra tenant is not configured for Arbor", 403);
  return { ok: true, aadTenantId, tenant };
}
