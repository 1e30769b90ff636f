import type { Caller, Principal } from "../domain/principal.ts";
import type { AnyResource } from "../domain/resources.ts";
import { conversationOf, lastElement, qualifiedType, tenantOf, type Urn } from "../domain/urn.ts";
import { ForbiddenError, ValidationError } from "../kernel/errors.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import type { PutResult, ResourceStore } from "./resource-store.ts";

export type { Caller, Principal } from "../domain/principal.ts";

export type ResourceAction = "resource.read" | "resource.write";

/**
 * Resource reads and writes on someone's behalf. Two checks, in order:
 *   1. the tenant boundary: a person or an assistant reaches only URNs under its own tenant. It
 *      is checked here, before any policy, so no policy (however written, or however its bundle
 *      was built) can open one tenant's resources to another;
 *   2. the policy (`resource.read` / `resource.write`), when there is one: default deny, and the
 *      decision's id goes into the error, so a refusal can be traced to its log line. The policy
 *      is told who owns the resource: whoever started the conversation it lies in (read from
 *      that conversation, whose URN is the URN's first two elements; see ownerOf).
 * The engine's own steps use the resource store directly: they act for every tenant.
 */
export class ResourceAccess {
  readonly #resources: ResourceStore;
  readonly #policy: PolicyEngine | undefined;

  constructor(resources: ResourceStore, policy?: PolicyEngine) {
    this.#resources = resources;
    this.#policy = policy;
  }

  /** Throws ForbiddenError unless `principal` may do `action` to `urn` (InvalidUrnError if it is no URN). */
  async authorize(
    principal: Principal,
    action: ResourceAction,
    urn: string,
    /** Owners already read, by conversation URN (several checks of one call share them). */
    owners?: Map<string, string | undefined>,
    /** The owner of a resource that lies in no conversation, as its caller knows it (a key's own record). */
    knownOwner?: string,
  ): Promise<void> {
    const last = lastElement(urn); // parses: a malformed URN is refused as such
    const tenant = tenantOf(urn);
    const verb = action === "resource.read" ? "read" : "write";
    if (principal.kind !== "system" && !tenant)
      throw new ForbiddenError(`${urn} belongs to no tenant: only the engine may ${verb} it`);
    holdTenantBoundary(principal, tenant ?? "", `${verb} ${urn}`);
    if (!this.#policy) return;
    // The engine acts for everyone: whose the resource is does not matter, and is not read.
    if (knownOwner !== undefined && conversationOf(urn))
      throw new ValidationError(`${urn} lies in a conversation: its owner is the conversation's, not given`);
    const owner =
      principal.kind === "system" ? undefined : (knownOwner ?? (await this.#ownerOf(urn, owners)));
    const decision = await this.#policy.decide({
      principal: policyPrincipal(principal),
      action,
      resource: {
        id: urn,
        tenant: tenant ?? "(none)",
        type: qualifiedType(last),
        ...(owner ? { owner } : {}),
      },
    });
    if (!decision.allow)
      throw new ForbiddenError(`${principal.id} may not ${verb} ${urn} (policy decision ${decision.id})`, {
        decisionId: decision.id,
      });
  }

  async #ownerOf(urn: string, owners: Map<string, string | undefined> | undefined) {
    const conversation = conversationOf(urn);
    if (!conversation) return undefined;
    if (owners?.has(conversation)) return owners.get(conversation);
    const owner = await ownerOf(this.#resources, urn);
    owners?.set(conversation, owner);
    return owner;
  }

  async read(principal: Principal, urn: string): Promise<AnyResource | undefined> {
    await this.authorize(principal, "resource.read", urn);
    return this.#resources.get(urn);
  }

  /** Reads several; refuses all of them if any one may not be read. */
  async readMany(principal: Principal, urns: readonly string[]): Promise<(AnyResource | undefined)[]> {
    await this.authorizeMany(principal, "resource.read", urns);
    return this.#resources.getMany(urns);
  }

  /** Throws unless `principal` may do `action` to every one of `urns` (owners read once each). */
  async authorizeMany(principal: Principal, action: ResourceAction, urns: readonly string[]): Promise<void> {
    const owners = new Map<string, string | undefined>();
    for (const urn of new Set(urns)) await this.authorize(principal, action, urn, owners);
  }

  /** Those of `urns` `principal` may read (the others left out, not refused; owners read once each). */
  async readable(principal: Principal, urns: readonly string[]): Promise<Set<string>> {
    const owners = new Map<string, string | undefined>();
    const allowed = new Set<string>();
    for (const urn of new Set(urns)) {
      try {
        await this.authorize(principal, "resource.read", urn, owners);
        allowed.add(urn);
      } catch (error) {
        if (!(error instanceof ForbiddenError)) throw error;
      }
    }
    return allowed;
  }

  /** URNs anywhere below `urn`, in key order. */
  async list(principal: Principal, urn: string): Promise<Urn[]> {
    await this.authorize(principal, "resource.read", urn);
    return this.#resources.descendantUrns(urn);
  }

  /** Writes a resource (validated as the store does) where its own URN says. */
  async write(principal: Principal, resource: unknown): Promise<PutResult> {
    const id = (resource as { meta?: { id?: unknown } } | null)?.meta?.id;
    if (typeof id !== "string") throw new ValidationError("A resource needs meta.id (its URN)");
    await this.authorize(principal, "resource.write", id);
    return this.#resources.put(resource);
  }
}

/**
 * Who owns `urn` for the policy: the actor who started the conversation it lies in (recorded on
 * the conversation by the engine, from the authenticated caller). Undefined when it lies in no
 * conversation, when the conversation does not exist, or when it was recorded before owners were:
 * then only those the policy lets act on the whole tenant may (admins, assistants, the engine).
 */
export async function ownerOf(resources: ResourceStore, urn: string): Promise<string | undefined> {
  const conversation = conversationOf(urn);
  if (!conversation) return undefined;
  return (await resources.getAs("common.Conversation", conversation))?.startedBy;
}

/**
 * The tenant boundary, checked before any policy: a person or an assistant acts only within its
 * own tenant (the engine, `system`, within every one). `doing` completes "<who> may not ...".
 */
export function holdTenantBoundary(principal: Principal, tenant: string, doing: string): void {
  if (principal.kind === "system" || principal.tenant === tenant) return;
  throw new ForbiddenError(
    `${principal.id} may not ${doing}: it belongs to tenant ${tenant}, ` +
      (principal.tenant ? `not to ${principal.tenant}` : "and the caller has no tenant"),
  );
}

/**
 * The principal an entry point acts for. A person is of the tenant the channel vouched for; with
 * none (the local CLI: one person, one tenant) of `ownTenant`, the tenant of what they address.
 * An assistant is always of the tenant at the root of its URN; the engine of none (every tenant).
 */
export function principalOf(
  actor: { id: string; kind: Principal["kind"] },
  caller: Caller,
  ownTenant: string | undefined,
): Principal {
  const tenant =
    actor.kind === "human"
      ? (caller.tenant ?? ownTenant)
      : actor.kind === "agent"
        ? actor.id.startsWith("cld:")
          ? tenantOf(actor.id)
          : caller.tenant
        : undefined;
  return { id: actor.id, kind: actor.kind, ...(tenant ? { tenant } : {}), roles: caller.roles ?? [] };
}

/** A principal as the policy takes it: its roles a list, always. */
export const policyPrincipal = (principal: Principal) => ({
  id: principal.id,
  kind: principal.kind,
  ...(principal.tenant ? { tenant: principal.tenant } : {}),
  roles: [...(principal.roles ?? [])],
});
