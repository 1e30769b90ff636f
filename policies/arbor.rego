# Arbor's default policy, in Rego (OPA, the AWS engine). Anything not allowed here is denied.
# It must decide exactly as arbor.cedar does: decisions.json is run against both.
package arbor.authz

import rego.v1

default allow := false

# The engine's own steps act for every tenant.
allow if input.principal.kind == "system"

# People and assistants read and write their own tenant's resources, never another's.
allow if {
	input.action in {"resource.read", "resource.write"}
	same_tenant
}

# An assistant calls the tools it is configured with, for its own tenant.
allow if {
	input.action == "tool.call"
	input.principal.kind == "agent"
	same_tenant
	input.resource.tool in input.context.allowedTools
}

# A person of the tenant answers its interactions, approvals of risky actions included.
allow if {
	input.action == "interaction.answer"
	input.principal.kind == "human"
	same_tenant
}

same_tenant if {
	input.principal.tenant
	input.principal.tenant == input.resource.tenant
}
