/**
 * The default Cedar policy, as code so that every bundle (a Lambda's included) carries it. It is
 * the text of policies/arbor.cedar, where people read and change it; a test fails if the two differ.
 */
export const DEFAULT_CEDAR_POLICY = `// Arbor's default policy, in Cedar (the local engine). Anything not permitted here is denied.
// It must decide exactly as arbor.rego does: decisions.json is run against both.

// The engine's own steps act for every tenant.
permit (principal is Arbor::System, action, resource);

// People and assistants read and write their own tenant's resources, never another's.
permit (
  principal,
  action in [Arbor::Action::"resource.read", Arbor::Action::"resource.write"],
  resource
)
when { principal has tenant && principal.tenant == resource.tenant };

// An assistant calls the tools it is configured with, for its own tenant.
permit (principal is Arbor::Agent, action == Arbor::Action::"tool.call", resource)
when {
  principal has tenant &&
  principal.tenant == resource.tenant &&
  resource has tool &&
  context.allowedTools.contains(resource.tool)
};

// A person of the tenant answers its interactions, approvals of risky actions included.
// (An assistant never answers one: no rule permits it.)
permit (principal is Arbor::Human, action == Arbor::Action::"interaction.answer", resource)
when { principal has tenant && principal.tenant == resource.tenant };
`;
