package arbor.authz_test

import rego.v1

import data.arbor.authz

agent := {"id": "cld:common.Tenant.acme/common.Assistant.a", "kind": "agent", "tenant": "acme"}

test_agent_calls_its_tool if {
	authz.allow with input as {
		"principal": agent,
		"action": "tool.call",
		"resource": {"id": "tool:sha256", "tenant": "acme", "type": "tool", "tool": "sha256"},
		"context": {"allowedTools": ["sha256"]},
	}
}

test_agent_cannot_call_another_tool if {
	not authz.allow with input as {
		"principal": agent,
		"action": "tool.call",
		"resource": {"id": "tool:send_email", "tenant": "acme", "type": "tool", "tool": "send_email"},
		"context": {"allowedTools": ["sha256"]},
	}
}

test_no_reading_across_tenants if {
	not authz.allow with input as {
		"principal": agent,
		"action": "resource.read",
		"resource": {"id": "cld:common.Tenant.other/common.Conversation.c", "tenant": "other", "type": "common.Conversation"},
		"context": {},
	}
}

test_agent_never_answers if {
	not authz.allow with input as {
		"principal": agent,
		"action": "interaction.answer",
		"resource": {"id": "cld:common.Tenant.acme/uip.Interaction.i", "tenant": "acme", "type": "uip.Interaction", "purpose": "confirm_risky_action"},
		"context": {},
	}
}

remote_agent := {"id": "agent_partner-planner", "kind": "agent", "tenant": "acme"}

test_remote_agent_writes_into_its_tenant if {
	authz.allow with input as {
		"principal": remote_agent,
		"action": "resource.write",
		"resource": {"id": "cld:common.Tenant.acme/common.Conversation.c1", "tenant": "acme", "type": "common.Conversation"},
		"context": {},
	}
}

test_no_reading_a_tenant_whose_name_starts_with_ours if {
	not authz.allow with input as {
		"principal": {"id": "user_ada", "kind": "human", "tenant": "acme"},
		"action": "resource.read",
		"resource": {"id": "cld:common.Tenant.acme2/common.Conversation.c1", "tenant": "acme2", "type": "common.Conversation"},
		"context": {},
	}
}
