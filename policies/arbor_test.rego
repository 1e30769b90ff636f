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

ask(principal, action, id, rtype, owner) := {
	"principal": principal,
	"action": action,
	"resource": {"id": id, "tenant": "acme", "type": rtype, "owner": owner, "purpose": "confirm_risky_action"},
	"context": {},
}

unowned(principal, action, id, rtype) := {
	"principal": principal,
	"action": action,
	"resource": {"id": id, "tenant": "acme", "type": rtype},
	"context": {},
}

test_owner_reads_posts_cancels_and_answers if {
	req1 := ask(ada, "resource.read", task, "plan.Task", "user_ada")
	authz.allow with input as req1
	req2 := ask(ada, "resource.write", conversation, "common.Conversation", "user_ada")
	authz.allow with input as req2
	req3 := ask(ada, "resource.write", task, "plan.Task", "user_ada")
	authz.allow with input as req3
	req4 := ask(ada, "interaction.answer", interaction, "uip.Interaction", "user_ada")
	authz.allow with input as req4
}

test_another_person_without_roles_does_nothing if {
	req5 := ask(bob, "resource.read", task, "plan.Task", "user_ada")
	not authz.allow with input as req5
	req6 := ask(bob, "resource.write", conversation, "common.Conversation", "user_ada")
	not authz.allow with input as req6
	req7 := ask(bob, "resource.write", task, "plan.Task", "user_ada")
	not authz.allow with input as req7
	req8 := ask(bob, "interaction.answer", interaction, "uip.Interaction", "user_ada")
	not authz.allow with input as req8
}

test_admin_does_anything_in_the_tenant if {
	req9 := ask(admin, "resource.read", task, "plan.Task", "user_ada")
	authz.allow with input as req9
	req10 := ask(admin, "resource.write", conversation, "common.Conversation", "user_ada")
	authz.allow with input as req10
	req11 := ask(admin, "resource.write", task, "plan.Task", "agent_partner")
	authz.allow with input as req11
	req12 := ask(admin, "interaction.answer", interaction, "uip.Interaction", "agent_partner")
	authz.allow with input as req12
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
	req13 := ask(partner, "resource.read", task, "plan.Task", "agent_partner")
	authz.allow with input as req13
	req14 := ask(partner, "resource.write", task, "plan.Task", "agent_partner")
	authz.allow with input as req14
	req15 := ask(partner, "resource.read", task, "plan.Task", "user_ada")
	not authz.allow with input as req15
	req16 := ask(partner, "resource.write", conversation, "common.Conversation", "user_ada")
	not authz.allow with input as req16
	req17 := ask(partner, "resource.write", task, "plan.Task", "user_ada")
	not authz.allow with input as req17
}

test_agent_never_answers_not_even_its_own if {
	req18 := ask(partner, "interaction.answer", interaction, "uip.Interaction", "agent_partner")
	not authz.allow with input as req18
	req19 := ask(object.union(partner, {"roles": ["admin"]}), "interaction.answer", interaction, "uip.Interaction", "user_ada")
	not authz.allow with input as req19
}

test_admin_role_gives_an_agent_nothing_more if {
	req20 := ask(object.union(partner, {"roles": ["admin"]}), "resource.read", task, "plan.Task", "user_ada")
	not authz.allow with input as req20
}

test_old_conversations_without_an_owner_are_for_admins if {
	req21 := unowned(ada, "resource.read", task, "plan.Task")
	not authz.allow with input as req21
	req22 := unowned(ada, "interaction.answer", interaction, "uip.Interaction")
	not authz.allow with input as req22
	req23 := unowned(admin, "resource.read", task, "plan.Task")
	authz.allow with input as req23
	req24 := unowned(admin, "interaction.answer", interaction, "uip.Interaction")
	authz.allow with input as req24
}

test_anyone_of_the_tenant_starts_a_conversation_only_admins_list_it if {
	req25 := unowned(bob, "resource.write", "cld:common.Tenant.acme", "common.Tenant")
	authz.allow with input as req25
	req26 := unowned(partner, "resource.write", "cld:common.Tenant.acme", "common.Tenant")
	authz.allow with input as req26
	req27 := unowned(bob, "resource.read", "cld:common.Tenant.acme", "common.Tenant")
	not authz.allow with input as req27
	req28 := unowned(admin, "resource.read", "cld:common.Tenant.acme", "common.Tenant")
	authz.allow with input as req28
}

test_assistant_reads_the_tenant_a_remote_agent_does_not if {
	req29 := ask(agent, "resource.read", task, "plan.Task", "user_ada")
	authz.allow with input as req29
	req30 := unowned(partner, "resource.read", "cld:common.Tenant.acme/common.Assistant.a", "common.Assistant")
	not authz.allow with input as req30
}

test_anyone_of_the_tenant_reads_its_tools_only_the_engine_writes_them if {
	tools := "cld:common.Tenant.acme/common.Tool.registry"
	req31 := unowned(bob, "resource.read", tools, "common.Tool")
	authz.allow with input as req31
	req32 := unowned(partner, "resource.read", tools, "common.Tool")
	authz.allow with input as req32
	req33 := unowned(bob, "resource.write", tools, "common.Tool")
	not authz.allow with input as req33
}

graph_of(tenant) := {"id": concat("", ["cld:common.Tenant.", tenant]), "tenant": tenant, "type": "rdf.Graph"}

test_agent_writes_its_tenants_graph if {
	authz.allow with input as {"principal": agent, "action": "graph.write", "resource": graph_of("acme"), "context": {}}
}

test_agent_never_reads_another_tenants_graph if {
	not authz.allow with input as {"principal": agent, "action": "graph.read", "resource": graph_of("other"), "context": {}}
}

test_admin_reads_the_graph if {
	authz.allow with input as {
		"principal": {"id": "user_ada", "kind": "human", "tenant": "acme", "roles": ["admin"]},
		"action": "graph.read",
		"resource": graph_of("acme"),
		"context": {},
	}
}

test_person_without_the_role_does_not_read_the_graph if {
	not authz.allow with input as {
		"principal": {"id": "user_bob", "kind": "human", "tenant": "acme"},
		"action": "graph.read",
		"resource": graph_of("acme"),
		"context": {},
	}
}

test_remote_agent_does_not_read_the_graph if {
	not authz.allow with input as {"principal": remote_agent, "action": "graph.read", "resource": graph_of("acme"), "context": {}}
}

secret := {"id": "cld:common.Tenant.acme/notify.CallbackSecret.k1", "tenant": "acme", "type": "notify.CallbackSecret", "owner": "agent_partner"}

test_a_key_reads_its_own_callback_secret if {
	authz.allow with input as {
		"principal": {"id": "agent_partner", "kind": "agent", "tenant": "acme", "roles": []},
		"action": "resource.read",
		"resource": secret,
		"context": {},
	}
}

test_another_key_never_reads_a_callback_secret if {
	not authz.allow with input as {
		"principal": {"id": "user_ada", "kind": "human", "tenant": "acme", "roles": []},
		"action": "resource.read",
		"resource": secret,
		"context": {},
	}
}

test_an_assistant_never_reads_a_callback_secret if {
	not authz.allow with input as {
		"principal": agent,
		"action": "resource.read",
		"resource": secret,
		"context": {},
	}
}

# ---- the engine's own steps: every action, in every tenant; the kind decides, never the id ----

engine := {"id": "system_engine", "kind": "system"}

test_the_engine_acts_for_every_tenant if {
	authz.allow with input as {
		"principal": engine,
		"action": "resource.write",
		"resource": {"id": "cld:common.Tenant.beta/common.Conversation.c9", "tenant": "beta", "type": "common.Conversation"},
		"context": {},
	}
	authz.allow with input as {
		"principal": engine,
		"action": "graph.write",
		"resource": {"id": "cld:common.Tenant.beta", "tenant": "beta", "type": "rdf.Graph"},
		"context": {},
	}
	authz.allow with input as {
		"principal": engine,
		"action": "resource.read",
		"resource": secret,
		"context": {},
	}
}

test_a_person_named_like_the_engine_is_no_engine if {
	not authz.allow with input as {
		"principal": {"id": "system_engine", "kind": "human", "tenant": "acme", "roles": []},
		"action": "resource.write",
		"resource": {"id": "cld:common.Tenant.beta/common.Conversation.c9", "tenant": "beta", "type": "common.Conversation"},
		"context": {},
	}
}

memory := {"id": "cld:common.Tenant.acme/mem.Scope.person-0123456789abcdef/mem.Memory.fedcba9876543210", "tenant": "acme", "type": "mem.Memory", "owner": "user_ada"}

test_an_assistant_never_reads_a_memory if {
	not authz.allow with input as {"principal": agent, "action": "resource.read", "resource": memory, "context": {}}
}

test_a_person_reads_a_memory_about_them if {
	authz.allow with input as {
		"principal": {"id": "user_ada", "kind": "human", "tenant": "acme", "roles": []},
		"action": "resource.read",
		"resource": memory,
		"context": {},
	}
}

test_a_person_never_reads_a_memory_about_another if {
	not authz.allow with input as {
		"principal": {"id": "user_bob", "kind": "human", "tenant": "acme", "roles": []},
		"action": "resource.read",
		"resource": memory,
		"context": {},
	}
}
