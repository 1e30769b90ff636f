import { hash, randomBytes } from "node:crypto";
import * as z from "zod";
import { type Actor, withCapabilities } from "../domain/events.ts";
import type { Caller } from "../domain/principal.ts";
import { DisplayNameSchema } from "../domain/resources.ts";
import { ArborError, ValidationError } from "../kernel/errors.ts";

/**
 * Key store port: the API keys the HTTP and A2A entry points accept. A key stands for one person
 * or one remote agent of one tenant, with roles; only its sha256 is ever stored, so no adapter
 * holds a secret. Adapters: the in-memory set (`ApiKeys`, shared/adapters/local/api-keys.ts), the keys
 * file of `arbor serve` (shared/adapters/local/file-key-store.ts), records of the state store
 * (shared/adapters/shared/state-key-store.ts, the state table on AWS). `CachedKeyStore`
 * (shared/channels/http/key-cache.ts) puts a short cache in front of any of them.
 */
/** A key's sha256 as stored: 64 lowercase hex digits. */
export const SHA256_HEX = /^[0-9a-f]{64}$/;

export const ApiKeySchema = z
  .object({
    /** The principal: `user_<name>` for a person, `agent_<name>` for a remote agent. */
    id: z.string().regex(/^(user|agent)_[A-Za-z0-9._@-]{1,100}$/, "user_<name> or agent_<name>"),
    kind: z.enum(["human", "agent"]),
    tenant: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "a tenant id: 1-64 of A-Z a-z 0-9 _ -"),
    roles: z.array(z.string().min(1).max(64)).max(50).default([]),
    /** How the principal is named where people read it (approvals, threads, the console). */
    name: DisplayNameSchema.optional(),
    /** The lowercase hex sha256 of the key. */
    sha256: z.string().regex(SHA256_HEX, "the lowercase hex sha256 of the key"),
  })
  .strict()
  .refine((k) => k.id.startsWith(k.kind === "human" ? "user_" : "agent_"), {
    message: "a person's id starts with user_, an agent's with agent_",
    path: ["id"],
  });

export type ApiKeyEntry = z.output<typeof ApiKeySchema>;

/**
 * Why a key about to be made would not do what it says, or undefined: the policy gives agents
 * nothing as admins (its admin rules are for persons), so an agent's key with the admin role would
 * look like an admin's and be refused everywhere. Keys already kept are left as they are.
 */
export function newKeyProblem(k: Pick<ApiKeyEntry, "kind" | "roles">): string | undefined {
  if (k.kind === "agent" && k.roles.includes("admin"))
    return "An agent's key cannot have the admin role: the policy gives admins' rights to persons only. Make the admin key for a user_<name>, or the agent's key without --role admin";
  return undefined;
}

/** Who a request is from, once its key is known. */
export interface Authenticated {
  actor: Actor;
  caller: Required<Caller>;
}

export interface KeyStore {
  /**
   * Who an `Authorization` header stands for, or undefined (no header, not a bearer key, unknown
   * key). Throws UnavailableError when no key can be checked now (a keys file that is not valid):
   * the channel refuses the request, it never lets it in.
   */
  authenticate(authorization: string | undefined | null): Promise<Authenticated | undefined>;
  /**
   * Who the key with this sha256 (lowercase hex) stands for, or undefined when no such key is kept
   * (any more): what a console session checks on every request, so that revoking a key ends the
   * sessions signed in with it. Throws like `authenticate`.
   */
  lookup(sha256: string): Promise<Authenticated | undefined>;
  /** The keys of `tenant` (every tenant's when absent), in a stable order. */
  list(tenant?: string): Promise<ApiKeyEntry[]>;
  /** Adds a key (checked as ApiKeySchema checks it); ConflictError when its hash is known already. */
  add(entry: ApiKeyEntry): Promise<void>;
  /**
   * Removes every key of the principal `which`, or the one key whose fingerprint starts with
   * `which` (8 to 64 hex digits), within `tenant` when given. Returns what it removed; NotFoundError
   * when nothing matches, ValidationError when a fingerprint names more than one key.
   */
  revoke(which: string, tenant?: string): Promise<ApiKeyEntry[]>;
}

/** The short, stable name of a key in listings: the first 12 hex digits of its sha256. */
export const fingerprintOf = (entry: Pick<ApiKeyEntry, "sha256">): string => entry.sha256.slice(0, 12);

/** The sha256 (hex) of the bearer key in an `Authorization` header, or undefined when there is none. */
export function bearerKeyHash(authorization: string | undefined | null): string | undefined {
  const match = /^Bearer\s+(\S{16,512})\s*$/i.exec(authorization ?? "");
  return match ? hash("sha256", match[1] as string) : undefined;
}

/** Who a stored key stands for. */
export const authenticatedAs = (k: ApiKeyEntry): Authenticated => ({
  actor: withCapabilities({ id: k.id, kind: k.kind, ...(k.name ? { name: k.name } : {}) }, k.roles),
  caller: { tenant: k.tenant, roles: k.roles },
});

/** Whether `which` is a fingerprint (as `keys list` shows them, at least 8 hex digits) rather than an id. */
export const isFingerprint = (which: string): boolean => /^[0-9a-f]{8,64}$/.test(which);

/**
 * The keys `revoke(which, tenant)` removes from `keys` (see KeyStore.revoke); throws the error that
 * says why none. Shared by the adapters so that they all decide alike. `where` names the store.
 */
export function keysToRevoke(
  keys: readonly ApiKeyEntry[],
  which: string,
  tenant: string | undefined,
  where: string,
): ApiKeyEntry[] {
  const byPrint = isFingerprint(which);
  const gone = keys.filter(
    (k) =>
      (tenant === undefined || k.tenant === tenant) &&
      (k.id === which || (byPrint && k.sha256.startsWith(which))),
  );
  if (gone.length === 0)
    throw new ArborError(
      "NOT_FOUND",
      `No key in ${where} has the id or fingerprint "${which}": \`arbor keys list\` shows them`,
      { details: { what: "API key", id: which } },
    );
  if (byPrint && gone.length > 1)
    throw new ValidationError(`${which} names ${gone.length} keys: give more digits of the fingerprint`);
  return gone;
}

/** A new random key and the entry that stands for it (the key itself is shown once, never stored). */
export function newApiKey(entry: Omit<ApiKeyEntry, "sha256">): { key: string; entry: ApiKeyEntry } {
  const key = `arbor_${randomBytes(24).toString("base64url")}`;
  return { key, entry: { ...entry, sha256: bearerKeyHash(`Bearer ${key}`) as string } };
}
