import type { Assistant } from "../domain/resources.ts";
import { expiresAfter, RETENTION_MS } from "../domain/retention.ts";
import { isRetired, type TeamDiff, type TeamFile, teamAssistantResource, teamDiff } from "../domain/team.ts";
import { tenantUrn, type Urn } from "../domain/urn.ts";
import { ConflictError, UnavailableError } from "../kernel/errors.ts";
import type { EngineDeps } from "./context.ts";
import { DEFAULT_TEAM } from "./default-team.ts";
import { ASSISTANT_TYPE, assistantEntries, indexAssistants } from "./steps/election.ts";

/**
 * A tenant's team: its Assistant resources and their vectors in the election index.
 *
 * Applying a team writes what the file adds or changes and retires what it no longer lists. A
 * retired assistant keeps its resource (with `retiredAt`) and loses its vector: election finds only
 * what is in the index, so it is never chosen again, while a task that elected it before goes on
 * (its turns read the assistant by URN) and its record stays readable. Deleting it instead would
 * fail such a task ("No assistant is assigned") and leave its election pointing at nothing.
 */
export type TeamDeps = Pick<EngineDeps, "resources" | "embedder" | "index" | "clock">;

/** Every Assistant resource of the tenant, retired ones included, in URN order. */
export async function storedAssistants(
  deps: Pick<TeamDeps, "resources">,
  tenant: string,
): Promise<Assistant[]> {
  return (await deps.resources.children(tenantUrn(tenant), ASSISTANT_TYPE)) as Assistant[];
}

/** The tenant's active assistants (what election may choose), in URN order. */
export async function activeAssistants(
  deps: Pick<TeamDeps, "resources">,
  tenant: string,
): Promise<Assistant[]> {
  return (await storedAssistants(deps, tenant)).filter((a) => !isRetired(a));
}

/**
 * Makes the tenant's team what `team` says and returns what changed (computed before anything is
 * written). Idempotent: applied again, the diff is all unchanged and no resource is written.
 *
 * Order, so that a failure at any point leaves a state the next apply completes: the embeddings
 * are computed first (embeddings unavailable: nothing is written); then the resources are
 * written; then every assistant of the file is (re)indexed, the unchanged ones too, so that an
 * apply interrupted between a write and its indexing is completed by the next one; a removed
 * assistant leaves the index before it is marked retired.
 */
export async function applyTeam(deps: TeamDeps, tenant: string, team: TeamFile): Promise<TeamDiff> {
  const stored = await storedAssistants(deps, tenant);
  const diff = teamDiff(tenant, stored, team);
  const byUrn = new Map(stored.map((a) => [a.meta.id as string, a]));
  const wanted = team.assistants.map((entry) => {
    const urn = teamAssistantResource(tenant, entry).meta.id;
    return teamAssistantResource(tenant, entry, byUrn.get(urn));
  });
  // Embedded before anything is written: an embedder that fails leaves the team as it was.
  const entries = await assistantEntries(deps, wanted);
  const writes = new Set([...diff.added, ...diff.changed].map((e) => e.urn as string));
  for (const a of wanted) if (writes.has(a.meta.id)) await deps.resources.put(a);
  await deps.index.upsert(entries);
  if (diff.removed.length > 0) {
    await deps.index.delete(diff.removed.map((e) => e.urn));
    const at = deps.clock().toISOString();
    for (const e of diff.removed) {
      const a = byUrn.get(e.urn);
      if (a) await deps.resources.put({ ...a, retiredAt: at });
    }
  }
  return diff;
}

/** How long one team apply may hold its tenant's team: past it (its process died), another may apply. */
export const TEAM_APPLY_LEASE_MS = 120_000;

/**
 * Runs `apply` holding the tenant's team apply lease (a state record, so it holds across processes
 * and Lambda instances): two applies of different files at once would otherwise each retire what
 * it read before the other wrote, and leave the team the union of both files, which nobody asked
 * for. The second is refused with ConflictError (409) and changes nothing; applied again once the
 * first is done, it shows its diff against what the first left.
 */
export async function withTeamApplyLease<T>(
  deps: Pick<EngineDeps, "state" | "clock">,
  tenant: string,
  apply: () => Promise<T>,
): Promise<T> {
  const key = `teamapply#${tenant}`;
  const now = deps.clock();
  const current = await deps.state.get<{ leaseUntil?: string }>(key);
  const busy = () =>
    new ConflictError(
      `Another team apply for tenant ${tenant} is under way: apply the file again in a moment (a dry run shows its change against what that one left)`,
    );
  if (current && Date.parse(current.data?.leaseUntil ?? "") > now.getTime()) throw busy();
  const held = (until: Date) => ({
    key,
    kind: "lease",
    updatedAt: deps.clock().toISOString(),
    expiresAt: expiresAfter(now, RETENTION_MS.claim),
    data: { leaseUntil: until.toISOString() },
  });
  const version = current?.version ?? 0;
  try {
    await deps.state.transact([
      { op: "put", record: held(new Date(now.getTime() + TEAM_APPLY_LEASE_MS)), expectedVersion: version },
    ]);
  } catch (error) {
    throw error instanceof ConflictError ? busy() : error;
  }
  try {
    return await apply();
  } finally {
    // Freed at once; if another took it over meanwhile (this one outlived its lease), it stays theirs.
    await deps.state
      .transact([{ op: "put", record: held(deps.clock()), expectedVersion: version + 1 }])
      .catch((error: unknown) => {
        if (!(error instanceof ConflictError)) throw error;
      });
  }
}

/** The URN a tenant's team is authorized on as a whole (reads, and every apply, dry runs too). */
export const teamUrn = (tenant: string): Urn => `${tenantUrn(tenant)}/${ASSISTANT_TYPE}.team` as Urn;

/** Tenants known to have a team, remembered per process at most this many (then looked up again). */
const MAX_STAFFED = 10_000;

/** Adds a tenant to one of Teams' sets, which start afresh past MAX_STAFFED (a look-up is only saved). */
function rememberIn(set: Set<string>, tenant: string): void {
  if (set.size >= MAX_STAFFED) set.clear();
  set.add(tenant);
}

/**
 * The one place a tenant without a team gets one (Engine.submit calls `ensure` before a request
 * is written): for a tenant with no assistants, the deployment's default team
 * (settings.defaultTeam: ARBOR_TEAM_FILE, `-c team`; else DEFAULT_TEAM) is applied, idempotently
 * (two first requests at once write the same resources). When that cannot be done (embeddings
 * unavailable, say) the request fails with an error that says so, having written nothing, rather
 * than waiting on an empty choice of assistants. The same on both runtimes.
 */
export class Teams {
  /** Tenants seen with assistants: a request of theirs needs no look-up. */
  readonly #staffed = new Set<string>();
  /** Tenants whose resource is known stored: a request of theirs reads it no more. */
  readonly #stored = new Set<string>();
  readonly deps: TeamDeps & Pick<EngineDeps, "settings" | "log" | "tools">;

  constructor(deps: TeamDeps & Pick<EngineDeps, "settings" | "log" | "tools">) {
    this.deps = deps;
  }

  async ensure(tenant: string): Promise<void> {
    if (!this.#staffed.has(tenant)) await this.#staff(tenant);
    // Once the tenant has a team: a request that is refused for want of one writes nothing.
    await this.#registerTools(tenant);
  }

  async #staff(tenant: string): Promise<void> {
    const d = this.deps;
    const stored = await d.resources.childUrns(tenantUrn(tenant), ASSISTANT_TYPE);
    if (stored.length > 0 && d.settings.reindexTeams) {
      // This process's index may lack them (a new embedder has an index of its own, a vectors
      // folder may be gone): indexed again, once per tenant and process (upserts change nothing else).
      await indexAssistants(d, await activeAssistants(d, tenant));
    }
    if (stored.length === 0) {
      const team: TeamFile = d.settings.defaultTeam ?? { assistants: DEFAULT_TEAM };
      try {
        const applied = await applyTeam(d, tenant, team);
        d.log.info("registered the default team for a tenant without one", {
          tenant,
          assistants: applied.added.map((a) => a.name),
        });
      } catch (cause) {
        throw new UnavailableError(
          `Tenant ${tenant} has no assistants yet, and its default team could not be registered ` +
            `(${(cause as Error).message}). The request was not taken: send it again later, or give the tenant a team ` +
            "with `arbor team apply <file>`.",
          { cause },
        );
      }
    }
    this.remember(tenant);
  }

  /**
   * The tenant's Tool resources made the configuration's (tools/service/tool-registry.ts; remembered by
   * the tool port, so this is no work on most requests). Not the request's failure when it
   * cannot be done: the tools run from the configuration, and ListTools registers them again.
   */
  async #registerTools(tenant: string): Promise<void> {
    try {
      await this.deps.tools.register?.(tenant);
    } catch (error) {
      this.deps.log.warn("could not register the tenant's Tool resources; ListTools will try again", {
        tenant,
        error: (error as Error).message,
      });
    }
  }

  /** Whether this process saw the tenant's resource stored (a tenant is never removed). */
  stored(tenant: string): boolean {
    return this.#stored.has(tenant);
  }

  storedNow(tenant: string): void {
    rememberIn(this.#stored, tenant);
  }

  /** The tenant has a team now (applied, or registered). */
  remember(tenant: string): void {
    rememberIn(this.#staffed, tenant);
  }
}
