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

test_remote_agent_writes_into_a_conversation_it_started if {
	authz.allow with input as {
		"principal": remote_agent,
		"action": "resource.write",
		"resource": {"id": "cld:common.Tenant.acme/common.Conversation.c1", "tenant": "acme", "type": "common.Conversation", "owner": "agent_partner-planner"},
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

# ---- who owns what: people their own conversations, admins the tenant, agents what they started ----

ada := {"id": "user_ada", "kind": "human", "tenant": "acme", "roles": []}

bob := {"id": "user_bob", "kind": "human", "tenant": "acme", "roles": []}

admin := {"id": "user_root", "kind": "human", "tenant": "acme", "roles": ["admin"]}

partner := {"id": "agent_partner", "kind": "agent", "tenant": "acme", "roles": []}

conversation := "cld:common.Tenant.acme/common.Conversation.c1"

task := "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.t1"

interaction := "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.t1/uip.Interaction.confirm"

ask(principal, action, id, type, owner) := {
	"principal": principal,
	"action": action,
	"resource": {"id": id, "tenant": "acme", "type": type, "owner": owner, "purpose": "confirm_risky_action"},
	"context": {},
}

unowned(principal, action, id, type) := {
	"principal": principal,
	"action": action,
	"resource": {"id": id, "tenant": "acme", "type": type},
	"context": {},
}

test_owner_reads_posts_cancels_and_answers if {
	authz.allow with input as ask(ada, "resource.read", task, "plan.Task", "user_ada")
	authz.allow with input as ask(ada, "resource.write", conversation, "common.Conversation", "user_ada")
	authz.allow with input as ask(ada, "resource.write", task, "plan.Task", "user_ada")
	authz.allow with input as ask(ada, "interaction.answer", interaction, "uip.Interaction", "user_ada")
}

test_another_person_without_roles_does_nothing if {
	not authz.allow with input as ask(bob, "resource.read", task, "plan.Task", "user_ada")
	not authz.allow with input as ask(bob, "resource.write", conversation, "common.Conversation", "user_ada")
	not authz.allow with input as ask(bob, "resource.write", task, "plan.Task", "user_ada")
	not authz.allow with input as ask(bob, "interaction.answer", interaction, "uip.Interaction", "user_ada")
}

test_admin_does_anything_in_the_tenant if {
	authz.allow with input as ask(admin, "resource.read", task, "plan.Task", "user_ada")
	authz.allow with input as ask(admin, "resource.write", conversation, "common.Conversation", "user_ada")
	authz.allow with input as ask(admin, "resource.write", task, "plan.Task", "agent_partner")
	authz.allow with input as ask(admin, "interaction.answer", interaction, "uip.Interaction", "agent_partner")
}

test_admin_of_one_tenant_nothing_in_another if {
	not authz.allow with input as {
		"principal": admin,
		"action": "resource.read",
		"resource": {"id": "cld:common.Tenant.beta/common.Conversation.c9", "tenant": "beta", "type": "common.Conversation", "owner": "user_root"},
		"context": {},
	}
}

test_agent_acts_on_what_it_started_only if {
	authz.allow with input as ask(partner, "resource.read", task, "plan.Task", "agent_partner")
	authz.allow with input as ask(partner, "resource.write", task, "plan.Task", "agent_partner")
	not authz.allow with input as ask(partner, "resource.read", task, "plan.Task", "user_ada")
	not authz.allow with input as ask(partner, "resource.write", conversation, "common.Conversation", "user_ada")
	not authz.allow with input as ask(partner, "resource.write", task, "plan.Task", "user_ada")
}

test_agent_never_answers_not_even_its_own if {
	not authz.allow with input as ask(partner, "interaction.answer", interaction, "uip.Interaction", "agent_partner")
	not authz.allow with input as ask(object.union(partner, {"roles": ["admin"]}), "interaction.answer", interaction, "uip.Interaction", "user_ada")
}

test_admin_role_gives_an_agent_nothing_more if {
	not authz.allow with input as ask(object.union(partner, {"roles": ["admin"]}), "resource.read", task, "plan.Task", "user_ada")
}

test_old_conversations_without_an_owner_are_for_admins if {
	not authz.allow with input as unowned(ada, "resource.read", task, "plan.Task")
	not authz.allow with input as unowned(ada, "interaction.answer", interaction, "uip.Interaction")
	authz.allow with input as unowned(admin, "resource.read", task, "plan.Task")
	authz.allow with input as unowned(admin, "interaction.answer", interaction, "uip.Interaction")
}

test_anyone_of_the_tenant_starts_a_conversation_only_admins_list_it if {
	authz.allow with input as unowned(bob, "resource.write", "cld:common.Tenant.acme", "common.Tenant")
	authz.allow with input as unowned(partner, "resource.write", "cld:common.Tenant.acme", "common.Tenant")
	not authz.allow with input as unowned(bob, "resource.read", "cld:common.Tenant.acme", "common.Tenant")
	authz.allow with input as unowned(admin, "resource.read", "cld:common.Tenant.acme", "common.Tenant")
}

test_assistant_reads_the_tenant_a_remote_agent_does_not if {
	authz.allow with input as ask(agent, "resource.read", task, "plan.Task", "user_ada")
	not authz.allow with input as unowned(partner, "resource.read", "cld:common.Tenant.acme/common.Assistant.a", "common.Assistant")
}
