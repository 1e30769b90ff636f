# Arbor's default policy, in Rego (OPA, the AWS engine). Anything not allowed here is denied.
# It must decide exactly as arbor.cedar does: decisions.json is run against both.
# A resource's owner is whoever started the conversation it lies in (absent outside one, and on
# conversations recorded before owners were); the tenant boundary is also held before any policy.
package arbor.authz

import rego.v1

default allow := false

resource_actions := {"resource.read", "resource.write"}

graph_actions := {"graph.read", "graph.write"}

# The engine's own steps act for every tenant.
allow if input.principal.kind == "system"

# An assistant of the tenant (its id is its URN) reads and writes the tenant's resources, except
# the keys' callback signing secrets (with one, it could forge callbacks to a key's receivers) and
# the memories (an assistant gets those through recall, the ones of its request's person only).
allow if {
	input.action in resource_actions
	input.principal.kind == "agent"
	same_tenant
	startswith(input.principal.id, "cld:")
	input.resource.type != "notify.CallbackSecret"
	input.resource.type != "mem.Memory"
}

# A person with the admin role reads and writes anything of their tenant.
allow if {
	input.action in resource_actions
	admin
}

# People and remote agents read and write in the conversations they started, never in another's,
# and what is theirs outside one (a key's own callback signing secret).
allow if {
	input.action in resource_actions
	same_tenant
	owner
}

# People and remote agents start conversations in their tenant (a write on the tenant itself).
allow if {
	input.action == "resource.write"
	same_tenant
	input.resource.type == "common.Tenant"
}

# Anyone of the tenant reads its tools (ListTools, GET /v1/tools): names, descriptions and
# schemas, never a binding's settings. Only the engine writes them (registration).
allow if {
	input.action == "resource.read"
	same_tenant
	input.resource.type == "common.Tool"
}

# An assistant calls the tools it is configured with, for its own tenant.
allow if {
	input.action == "tool.call"
	input.principal.kind == "agent"
	same_tenant
	input.resource.tool in input.context.allowedTools
}

# A tenant's graph (its linked data, resource type rdf.Graph, no owner: the tenant's, not a
# conversation's): its assistants read and write it (what they learn, for later tasks)...
allow if {
	input.action in graph_actions
	input.resource.type == "rdf.Graph"
	input.principal.kind == "agent"
	same_tenant
	startswith(input.principal.id, "cld:")
}

# ...and so do its admins. Nobody else: not a person without the role, not a remote agent.
allow if {
	input.action in graph_actions
	input.resource.type == "rdf.Graph"
	admin
}

# A person answers the interactions of the conversations they started, approvals of risky
# actions included; a person with the admin role answers any of their tenant's. (An agent never
# answers one, not even in what it started: no rule allows it.)
allow if {
	input.action == "interaction.answer"
	admin
}

allow if {
	input.action == "interaction.answer"
	input.principal.kind == "human"
	same_tenant
	owner
}

same_tenant if {
	input.principal.tenant
	input.principal.tenant == input.resource.tenant
}

admin if {
	input.principal.kind == "human"
	same_tenant
	"admin" in input.principal.roles
}

owner if {
	input.resource.owner
	input.resource.owner == input.principal.id
}
