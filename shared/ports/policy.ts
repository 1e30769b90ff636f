import * as z from "zod";

/**
 * The policy port: who may do what to which resource. Engines (Cedar locally, OPA on AWS) answer
 * allow or deny, and deny on anything but an explicit allow, including their own errors. Every
 * decision has an id, a hash of its input and the revision of the policies that made it, so that
 * a log line or an audit record can point at it.
 */
export const POLICY_ACTIONS = [
  "resource.read",
  "resource.write",
  "tool.call",
  "interaction.answer",
  /** A tenant's linked data (shared/graph/): resource `cld:common.Tenant.<t>`, type `rdf.Graph`. */
  "graph.read",
  "graph.write",
] as const;
export type PolicyAction = (typeof POLICY_ACTIONS)[number];

export const PolicyInputSchema = z.object({
  principal: z.object({
    /** A person's id, an assistant's URN, or `system_engine`. */
    id: z.string().min(1).max(1000),
    kind: z.enum(["human", "agent", "system"]),
    /** The tenant the principal belongs to (a system principal has none). */
    tenant: z.string().min(1).max(64).optional(),
    /** `admin`: a person who may act on anything of their tenant (see policies/README.md). */
    roles: z.array(z.string().min(1).max(64)).max(50).default([]),
  }),
  action: z.enum(POLICY_ACTIONS),
  resource: z.object({
    /** The resource's URN, or `tool:<name>` for a tool. */
    id: z.string().min(1).max(1000),
    /** The tenant it belongs to (the root of its URN; for a tool, the tenant it is called for). */
    tenant: z.string().min(1).max(64),
    /** `meta.type` (`common.Message`, `uip.Interaction`, ...) or `tool`. */
    type: z.string().min(1).max(100),
    /** tool.call: the tool's name, and whether a person must confirm it. */
    tool: z.string().min(1).max(64).optional(),
    risky: z.boolean().optional(),
    /** interaction.answer: the interaction's purpose (`confirm_risky_action`, ...). */
    purpose: z.string().min(1).max(100).optional(),
    /**
     * resource.read / resource.write / interaction.answer: who started the conversation the
     * resource lies in (its `startedBy`, an actor id): they own it and everything below it. Absent
     * for what lies in no conversation (the tenant, its assistants) and for conversations recorded
     * before owners were.
     */
    owner: z.string().min(1).max(1000).optional(),
  }),
  context: z
    .object({
      /** tool.call: the tools the acting assistant is configured with. */
      allowedTools: z.array(z.string().min(1).max(64)).max(500).optional(),
    })
    .default({}),
});
export type PolicyInput = z.input<typeof PolicyInputSchema>;

export interface PolicyDecision {
  allow: boolean;
  /** Unique per decision: log lines and audit records point at it. */
  id: string;
  /** sha256 of the input as decided (after defaults). */
  inputHash: string;
  /** The revision of the policies (a hash of the policy text or bundle). */
  revision: string;
  engine: "cedar" | "opa";
  /** The policies that decided, or why it was denied (an error is a deny). */
  reasons: string[];
}

export interface PolicyEngine {
  readonly engine: "cedar" | "opa";
  readonly revision: string;
  decide(input: PolicyInput): Promise<PolicyDecision>;
}
