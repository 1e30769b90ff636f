/**
 * The default Cedar policy, as code so that every bundle (a Lambda's included) carries it. It is
 * the text of policies/arbor.cedar, where people read and change it; a test fails if the two differ.
 */
export const DEFAULT_CEDAR_POLICY = `// Arbor's default policy, in Cedar (the local engine). Anything not permitted here is denied.
// It must decide exactly as arbor.rego does: decisions.json is run against both.
// A resource's owner is whoever started the conversation it lies in (absent outside one, and on
// conversations recorded before owners were); the tenant boundary is also held before any policy.

// The engine's own steps act for every tenant.
permit (principal is Arbor::System, action, resource);

// An assistant of the tenant (its id is its URN) reads and writes the tenant's resources, except
// the keys' callback signing secrets (with one, it could forge callbacks to a key's receivers) and
// the memories (an assistant gets those through recall, the ones of its request's person only).
permit (
  principal is Arbor::Agent,
  action in [Arbor::Action::"resource.read", Arbor::Action::"resource.write"],
  resource
)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  principal.id like "cld:*" &&
  resource.type != "notify.CallbackSecret" &&
  resource.type != "mem.Memory"
};

// A person with the admin role reads and writes anything of their tenant.
permit (
  principal is Arbor::Human,
  action in [Arbor::Action::"resource.read", Arbor::Action::"resource.write"],
  resource
)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  principal.roles.contains("admin")
};

// People and remote agents read and write in the conversations they started, never in another's,
// and what is theirs outside one (a key's own callback signing secret).
permit (
  principal,
  action in [Arbor::Action::"resource.read", Arbor::Action::"resource.write"],
  resource
)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  resource has owner &&
  resource.owner == principal.id
};

// People and remote agents start conversations in their tenant (a write on the tenant itself).
permit (principal, action == Arbor::Action::"resource.write", resource)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  resource.type == "common.Tenant"
};

// Anyone of the tenant reads its tools (ListTools, GET /v1/tools): names, descriptions and
// schemas, never a binding's settings. Only the engine writes them (registration).
permit (principal, action == Arbor::Action::"resource.read", resource)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  resource.type == "common.Tool"
};

// An assistant calls the tools it is configured with, for its own tenant.
permit (principal is Arbor::Agent, action == Arbor::Action::"tool.call", resource)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  resource has tool &&
  context.allowedTools.contains(resource.tool)
};

// A tenant's graph (its linked data, resource type rdf.Graph, no owner: the tenant's, not a
// conversation's): its assistants read and write it (what they learn, for later tasks)...
permit (
  principal is Arbor::Agent,
  action in [Arbor::Action::"graph.read", Arbor::Action::"graph.write"],
  resource
)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  principal.id like "cld:*" &&
  resource.type == "rdf.Graph"
};

// ...and so do its admins. Nobody else: not a person without the role, not a remote agent.
permit (
  principal is Arbor::Human,
  action in [Arbor::Action::"graph.read", Arbor::Action::"graph.write"],
  resource
)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  principal.roles.contains("admin") &&
  resource.type == "rdf.Graph"
};

// A person answers the interactions of the conversations they started, approvals of risky
// actions included; a person with the admin role answers any of their tenant's. (An agent never
// answers one, not even in what it started: no rule permits it.)
permit (principal is Arbor::Human, action == Arbor::Action::"interaction.answer", resource)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  (principal.roles.contains("admin") || (resource has owner && resource.owner == principal.id))
};
`;
