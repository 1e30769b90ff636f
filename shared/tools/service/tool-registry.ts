import { hash } from "node:crypto";
import { type ToolResource, withMeta } from "../../domain/resources.ts";
import { tenantUrn, type Urn } from "../../domain/urn.ts";
import { ConflictError, UnavailableError, ValidationError } from "../../kernel/errors.ts";
import type { StateStore } from "../../ports/state-store.ts";
import type { ToolDescriptor, ToolRegistration } from "../../ports/tools.ts";
import type { ResourceStore } from "../../store/resource-store.ts";
import { NAMESPACE, NAMESPACE_RULE } from "./config.ts";

/**
 * Tools as resources (seeds/001's "tool schemas generated from configuration, stored as
 * resources", and ListTools reading them). Tools are configured per deployment; their resources
 * are per tenant, `cld:common.Tenant.<t>/common.Tool.<id>`, the id deterministic (withMeta: from
 * the tenant, the type and the tool's name), so two writers of one tool write one object.
 *
 * - A resource holds what the model is shown (name, description, JSON Schema), what the tool is
 *   (kind, risky, pure), its namespace and a fingerprint of all that: never a binding's settings
 *   (URLs, headers, tokens stay in the configuration).
 * - Registering a tenant: its stored Tool resources are compared with the configuration's, by
 *   fingerprint; what is new or changed is written, what is no longer configured is DELETED (not
 *   marked): a tool that is not configured cannot be called (ExecuteTool goes through the
 *   configured binding and says "Unknown tool"), so a listing must not offer it, and its calls'
 *   history is in the audit log, not in the resource. Then the tenant's registration record (the
 *   state store, `toolregistry#<tenant>`) gets the hash of the whole set, written conditionally
 *   on the version read before (its status "unindexed" until the search index's pass, tool-index.ts,
 *   has indexed the set): when two registrations race, the one whose record write fails
 *   looks again, and redoes its writes unless the winner registered the same set. So two
 *   processes with one configuration end with that set, and two with different ones (a deploy
 *   under way) with one of them whole, never a mix. A registration whose record already holds
 *   this set's hash reads nothing else and writes nothing.
 * - Listing reads the tenant's Tool resources (one prefix listing below the tenant, one read each),
 *   filtered by namespace, sorted by name.
 */
export const TOOL_TYPE = "common.Tool";

/** The state record of a tenant's registration. */
export const REGISTRY_PREFIX = "toolregistry#";
const registryKey = (tenant: string) => `${REGISTRY_PREFIX}${tenant}`;
export const REGISTRY_KIND = "tool-registry";
/** A registration's status until its tools are in the search index (then "indexed"). */
export const UNINDEXED = "unindexed";

export interface RegistryRecord {
  hash: string;
  tools: string[];
  /** The tools' names the search index holds (tool-index.ts): what to take out when they go. */
  indexed?: string[];
}

const TENANT_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** The URN of a tenant whose id is one (tenantUrn formats whatever it is given). */
function tenantOfId(tenant: string): Urn {
  if (!TENANT_ID.test(tenant))
    throw new ValidationError(
      `${JSON.stringify(tenant.slice(0, 80))} is not a tenant id: 1-128 of A-Z a-z 0-9 _ -`,
    );
  return tenantUrn(tenant);
}

/** A namespace a caller asked for, checked: undefined (all), or one that NAMESPACE allows. */
export function checkNamespace(namespace: unknown): string | undefined {
  if (namespace === undefined) return undefined;
  if (typeof namespace === "string" && NAMESPACE.test(namespace)) return namespace;
  const shown = typeof namespace === "string" ? JSON.stringify(namespace.slice(0, 80)) : typeof namespace;
  throw new ValidationError(`${shown} is not a namespace: a namespace is ${NAMESPACE_RULE}`, [
    `namespace: must match ${NAMESPACE.source}`,
  ]);
}

/** JSON with object keys sorted: the same document hashes the same, whatever its key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(value) ?? "null";
}

const namespaceOfDescriptor = (d: ToolDescriptor) => d.namespace ?? d.kind;

/** sha256 of what a tool's resource says (its descriptor and namespace). */
export function fingerprintOf(d: ToolDescriptor): string {
  const { name, description, parameters, kind, risky, pure } = d;
  return hash(
    "sha256",
    canonical({ name, description, parameters, kind, risky, pure, namespace: namespaceOfDescriptor(d) }),
  );
}

/** sha256 of a whole set of tools: what a tenant's registration record holds. */
export function registryHash(descriptors: readonly ToolDescriptor[]): string {
  const lines = descriptors.map((d) => `${d.name}:${fingerprintOf(d)}`).sort();
  return hash("sha256", lines.join("\n"));
}

/** The most of a description a resource keeps (an MCP server's may be longer): the rest is cut. */
const MAX_DESCRIPTION = 4000;
const bounded = (text: string) =>
  text.length <= MAX_DESCRIPTION ? text : `${text.slice(0, MAX_DESCRIPTION - 1)}…`;

/** The Tool resource of a descriptor under a tenant. */
export function toolResource(tenant: string, d: ToolDescriptor) {
  const description = bounded(d.description);
  return {
    meta: withMeta({ type: TOOL_TYPE, name: d.name, parent: tenantUrn(tenant), purpose: description }),
    function: { name: d.name, description, parameters: d.parameters },
    risky: d.risky,
    pure: d.pure,
    namespace: namespaceOfDescriptor(d),
    fingerprint: fingerprintOf(d),
    // Settings may hold secrets: they stay in the configuration.
    binding: { kind: d.kind, config: {} },
  };
}

/** The URN of a tenant's resource of the tool `name`. */
export const toolUrn = (tenant: string, name: string): Urn =>
  withMeta({ type: TOOL_TYPE, name, parent: tenantUrn(tenant) }).id as Urn;

/** A stored Tool resource as ListTools answers it. */
export function descriptorOf(r: ToolResource): ToolDescriptor {
  return {
    name: r.function.name,
    description: r.function.description,
    parameters: r.function.parameters,
    kind: r.binding.kind,
    risky: r.risky,
    pure: r.pure,
    namespace: r.namespace ?? r.binding.kind,
  };
}

/** ListTools: the tenant's stored Tool resources, of `namespace` (checked) or all, by name. */
export async function storedTools(
  resources: ResourceStore,
  tenant: string,
  namespace?: string,
): Promise<ToolDescriptor[]> {
  const ns = checkNamespace(namespace);
  const stored = (await resources.children(tenantOfId(tenant), TOOL_TYPE)) as ToolResource[];
  return stored
    .map(descriptorOf)
    .filter((d) => ns === undefined || d.namespace === ns)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export interface RegistryDeps {
  resources: ResourceStore;
  /** Where the tenant's registration record is (absent: every registration compares the resources). */
  state?: StateStore;
  clock: () => Date;
}

/** How many times a registration looks again after losing a race, before it gives up. */
const MAX_ROUNDS = 4;

/** Makes the tenant's Tool resources `descriptors` (see above). Idempotent; safe to race. */
export async function registerTools(
  deps: RegistryDeps,
  tenant: string,
  descriptors: readonly ToolDescriptor[],
): Promise<ToolRegistration> {
  const parent = tenantOfId(tenant); // a tenant id that cannot be in a URN is refused here
  const wanted = descriptors.map((d) => toolResource(tenant, d));
  const registryHashValue = registryHash(descriptors);
  const urns = wanted.map((r) => r.meta.id as Urn);
  const written = new Set<string>();
  const deleted = new Set<string>();
  const done = (): ToolRegistration => ({
    written: [...written].sort(),
    deleted: [...deleted].sort(),
    registryHash: registryHashValue,
    urns,
  });
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const record = await deps.state?.get<RegistryRecord>(registryKey(tenant));
    // The same set (recorded since the search index's pass exists: a record without a status is
    // written once more, so that the pass indexes its tools).
    if (record?.data.hash === registryHashValue && record.status !== undefined) return done();
    const stored = (await deps.resources.children(parent, TOOL_TYPE)) as ToolResource[];
    const byUrn = new Map(stored.map((r) => [r.meta.id as string, r]));
    for (const r of wanted) {
      if (byUrn.get(r.meta.id)?.fingerprint === r.fingerprint) continue;
      await deps.resources.put(r);
      written.add(r.function.name);
    }
    const keep = new Set<string>(urns);
    for (const r of stored) {
      if (keep.has(r.meta.id)) continue;
      await deps.resources.delete(r.meta.id);
      deleted.add(r.function.name);
    }
    if (!deps.state) return done();
    try {
      await deps.state.transact([
        {
          op: "put",
          record: {
            key: registryKey(tenant),
            kind: REGISTRY_KIND,
            // For the search index's pass (tool-index.ts), which keeps what it indexed last.
            status: UNINDEXED,
            updatedAt: deps.clock().toISOString(),
            data: {
              hash: registryHashValue,
              tools: descriptors.map((d) => d.name).sort(),
              ...(record?.data.indexed ? { indexed: record.data.indexed } : {}),
            },
          },
          expectedVersion: record?.version ?? 0,
        },
      ]);
      return done();
    } catch (error) {
      // Another registration recorded its set meanwhile: look again (the same set: done).
      if (!(error instanceof ConflictError)) throw error;
    }
  }
  throw new UnavailableError(
    `The tools of tenant ${tenant} are being registered by other processes with other configurations ` +
      "(a deploy under way?): list them again in a moment",
  );
}
