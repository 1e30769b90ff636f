import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CedarPolicyEngine } from "../../../../shared/adapters/policy/cedar-policy-engine.ts";
import { Decisions, MAX_REMEMBERED } from "../../../../shared/adapters/policy/decisions.ts";
import { DEFAULT_CEDAR_POLICY } from "../../../../shared/adapters/policy/default-policy.ts";
import { OpaPolicyEngine } from "../../../../shared/adapters/policy/opa-policy-engine.ts";
import { ConfigError } from "../../../../shared/kernel/errors.ts";
import { POLICY_ACTIONS, type PolicyInput } from "../../../../shared/ports/policy.ts";

/**
 * The default policy as a decision table (policies/decisions.json), run against the Cedar engine
 * and its policies (policies/arbor.cedar). The same table is the contract for an OPA bundle built
 * from policies/arbor.rego.
 */
const policies = join(import.meta.dirname, "../../../../policies");
const table = JSON.parse(readFileSync(join(policies, "decisions.json"), "utf8")) as {
  decisions: { case: string; input: PolicyInput; expected: "allow" | "deny" }[];
};
const cedar = CedarPolicyEngine.fromFile(join(policies, "arbor.cedar"));
const first = (table.decisions[0] as (typeof table.decisions)[number]).input;

describe("the default policy on Cedar (policies/decisions.json)", () => {
  for (const row of table.decisions) {
    it(`${row.expected}: ${row.case}`, async () => {
      const decision = await cedar.decide(row.input);
      expect(decision.allow ? "allow" : "deny").toBe(row.expected);
      expect(decision).toMatchObject({ engine: "cedar", revision: cedar.revision });
      expect(decision.id).toMatch(/^dec_/);
      expect(decision.inputHash).toMatch(/^[0-9a-f]{64}$/);
    });
  }

  it("gives every decision its own id, the same input the same hash and answer", async () => {
    const [a, b] = [await cedar.decide(first), await cedar.decide(first)];
    expect(a.id).not.toBe(b.id);
    expect(a.inputHash).toBe(b.inputHash);
    expect(a.allow).toBe(b.allow);
  });

  it("remembers at most MAX_REMEMBERED answers, forgetting the oldest first", () => {
    let evaluated = 0;
    const evaluate = () => {
      evaluated++;
      return { allow: true, reasons: [] };
    };
    const decisions = new Decisions("cedar", "r1", evaluate, { remember: true });
    const input = (i: number): PolicyInput => ({
      ...first,
      resource: { ...first.resource, id: `cld:common.Tenant.t/common.Conversation.c${i}` },
    });
    for (let i = 0; i <= MAX_REMEMBERED + 10; i++) decisions.decide(input(i));
    expect(evaluated).toBe(MAX_REMEMBERED + 11);
    decisions.decide(input(MAX_REMEMBERED)); // recent: remembered
    decisions.decide(input(MAX_REMEMBERED / 2));
    expect(evaluated).toBe(MAX_REMEMBERED + 11);
    decisions.decide(input(0)); // the oldest: forgotten
    expect(evaluated).toBe(MAX_REMEMBERED + 12);
  });

  it("refuses policies that do not parse, saying where: on check(), and at every decision", async () => {
    const broken = new CedarPolicyEngine("permit (principal, action, resource", "policies/broken.cedar");
    await expect(broken.check()).rejects.toThrow(ConfigError);
    await expect(broken.check()).rejects.toThrow(/policies\/broken\.cedar do not parse/);
    await expect(broken.decide(first)).rejects.toThrow(/policies\/broken\.cedar do not parse/);
  });

  it("denies what no policy allows, and an input it cannot read", async () => {
    const empty = new CedarPolicyEngine("// nothing is permitted");
    expect((await empty.decide(first)).allow).toBe(false);
    await expect(cedar.decide({ ...first, action: "deploy" as never })).rejects.toThrow();
  });

  it("never allows by accident (fuzzed inputs): no cross-tenant access, no tool outside the list, no agent approving, nobody in another's conversation", async () => {
    const tenant = fc.constantFrom("acme", "beta", "gamma");
    const name = fc.constantFrom("sha256", "send_email", "http_request", "x");
    const who = fc.constantFrom(
      "user_ada",
      "user_bob",
      "agent_partner",
      "cld:common.Tenant.acme/common.Assistant.a",
    );
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          kind: fc.constantFrom("human", "agent", "system" as const),
          id: who,
          pTenant: fc.option(tenant, { nil: undefined }),
          rTenant: tenant,
          action: fc.constantFrom(...POLICY_ACTIONS),
          type: fc.constantFrom(
            "uip.Interaction",
            "plan.Task",
            "common.Conversation",
            "common.Tenant",
            "common.Tool",
            "rdf.Graph",
          ),
          owner: fc.option(who, { nil: undefined }),
          tool: fc.option(name, { nil: undefined }),
          allowed: fc.option(fc.array(name, { maxLength: 3 }), { nil: undefined }),
          purpose: fc.option(fc.constantFrom("confirm_risky_action", "request_info"), { nil: undefined }),
          roles: fc.array(fc.constantFrom("approver", "admin"), { maxLength: 2 }),
        }),
        async (f) => {
          const input: PolicyInput = {
            principal: {
              id: f.id,
              kind: f.kind,
              roles: f.roles,
              ...(f.pTenant ? { tenant: f.pTenant } : {}),
            },
            action: f.action,
            resource: {
              id: f.tool ? `tool:${f.tool}` : "cld:x",
              tenant: f.rTenant,
              type: f.tool ? "tool" : f.type,
              ...(f.tool ? { tool: f.tool } : {}),
              ...(f.purpose ? { purpose: f.purpose } : {}),
              ...(f.owner ? { owner: f.owner } : {}),
            },
            context: f.allowed ? { allowedTools: f.allowed } : {},
          };
          const { allow } = await cedar.decide(input);
          if (!allow || f.kind === "system") return;
          expect(f.pTenant).toBe(f.rTenant);
          const admin = f.kind === "human" && f.roles.includes("admin");
          const owns = f.owner === f.id;
          if (f.action === "tool.call") {
            expect(f.kind).toBe("agent");
            expect(f.allowed).toContain(f.tool);
          }
          if (f.action === "interaction.answer") {
            expect(f.kind).toBe("human");
            expect(admin || owns).toBe(true);
          }
          if (f.action === "resource.read" || f.action === "resource.write") {
            const assistant = f.kind === "agent" && f.id.startsWith("cld:");
            const starts = f.action === "resource.write" && !f.tool && f.type === "common.Tenant";
            const readsTools = f.action === "resource.read" && f.type === "common.Tool";
            expect(assistant || admin || owns || starts || readsTools).toBe(true);
          }
          if (f.action === "graph.read" || f.action === "graph.write") {
            // A tenant's graph: its assistants and its admins only, and on a graph only.
            expect(f.tool ? "tool" : f.type).toBe("rdf.Graph");
            expect((f.kind === "agent" && f.id.startsWith("cld:")) || admin).toBe(true);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("the default policy carried in code", () => {
  it("is exactly policies/arbor.cedar", () => {
    expect(DEFAULT_CEDAR_POLICY).toBe(readFileSync(join(policies, "arbor.cedar"), "utf8"));
  });
});

/**
 * The same table against an OPA bundle built from policies/arbor.rego, when one is present
 * (`opa build -t wasm -e arbor/authz/allow -o policies/bundle.tar.gz policies/arbor.rego`, and its
 * sha256 in policies/bundle.tar.gz.sha256; see policies/README.md). These machines have no OPA
 * compiler, so CI usually has none: the OPA path itself is tested in policy-opa.test.ts.
 */
const bundlePresent = existsSync(join(policies, "bundle.tar.gz"));
describe(`the default policy on OPA (${bundlePresent ? "policies/bundle.tar.gz" : "no bundle present"})`, () => {
  if (!bundlePresent) {
    it("has no bundle to check here: build one with the OPA CLI to run the table against it", () => {
      expect(existsSync(join(policies, "bundle.tar.gz.sha256"))).toBe(false);
    });
    return;
  }
  for (const row of table.decisions) {
    it(`${row.expected}: ${row.case}`, async () => {
      const opa = await OpaPolicyEngine.fromFolder(policies);
      expect((await opa.decide(row.input)).allow ? "allow" : "deny").toBe(row.expected);
    });
  }
});
