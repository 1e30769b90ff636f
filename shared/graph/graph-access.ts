import { tenantUrn } from "../domain/urn.ts";
import { ForbiddenError } from "../kernel/errors.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import { holdTenantBoundary, type Principal, policyPrincipal } from "../store/resource-access.ts";

export type GraphAction = "graph.read" | "graph.write";

/** The policy's name for a tenant's graph: its resource id is the tenant's URN, its type this. */
export const GRAPH_TYPE = "rdf.Graph";

/**
 * Who may read or write a tenant's graph, checked as resource access is (resource-access.ts):
 *   1. the tenant boundary, in code before any policy: a person or an assistant reaches only its
 *      own tenant's graph, whatever a policy says;
 *   2. the policy (`graph.read` / `graph.write`, resource `cld:common.Tenant.<t>` of type
 *      `rdf.Graph`, no owner: the graph is the tenant's, not a conversation's), default deny, the
 *      decision's id in the error. By default: the tenant's assistants and admins (policies/).
 */
export async function authorizeGraph(
  policy: PolicyEngine | undefined,
  principal: Principal,
  action: GraphAction,
  tenant: string,
): Promise<void> {
  const verb = action === "graph.read" ? "read" : "write";
  holdTenantBoundary(principal, tenant, `${verb} the graph of tenant ${tenant}`);
  if (!policy) return;
  const decision = await policy.decide({
    principal: policyPrincipal(principal),
    action,
    resource: { id: tenantUrn(tenant), tenant, type: GRAPH_TYPE },
  });
  if (!decision.allow)
    throw new ForbiddenError(
      `${principal.id} may not ${verb} the graph of tenant ${tenant} (policy decision ${decision.id})`,
      { decisionId: decision.id },
    );
}
