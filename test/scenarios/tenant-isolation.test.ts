import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { CedarPolicyEngine } from "../../shared/adapters/policy/cedar-policy-engine.ts";
import type { Actor } from "../../shared/domain/events.ts";
import { withMeta } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { ForbiddenError, NotFoundError, ValidationError } from "../../shared/kernel/errors.ts";
import type { PolicyEngine } from "../../shared/ports/policy.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { type Principal, ResourceAccess } from "../../shared/store/resource-access.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Tenants are isolated by URN prefix: a person or an assistant of one tenant can neither read nor
 * write another's URNs, through any entry point or tool, whatever the policy says.
 */
const BETA_PERSON: Actor = { id: "user_bea", kind: "human" };
const ACME = { tenant: "acme" };
const BETA = { tenant: "beta" };

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** Allows everything: the tenant boundary must hold even under a policy written this badly. */
const ALLOW_ALL: PolicyEngine = {
  engine: "cedar",
  revision: "allow-all",
  decide: async () => ({
    allow: true,
    id: "d-all",
    inputHash: "",
    revision: "allow-all",
    engine: "cedar",
    reasons: [],
  }),
};

async function twoTenants() {
  const script = (r: Parameters<typeof isPlan>[0]) => {
    if (isPlan(r)) return planOf({ name: "Offsite", purpose: "Plan the offsite" });
    if (isEvaluation(r)) return pass();
    return { content: "planned" };
  };
  h = await Harness.create({ script, assistants: GENERALIST });
  await h.engine.registerAssistants("beta", GENERALIST);
  // Beta's request waits for its person to approve the plan: there is something to answer.
  const beta = await h.engine.submit({
    tenant: "beta",
    text: "Plan our offsite",
    actor: BETA_PERSON,
    mode: "lazy",
  });
  await h.idle();
  return { h, beta };
}

describe("tenant isolation at the entry points", () => {
  it("a person of one tenant cannot write into, cancel, read or answer another tenant's work", async () => {
    const { h, beta } = await twoTenants();
    const [approval] = await h.pending(beta.rootTaskId);
    expect(approval?.purpose).toBe("approve_plan");
    const before = await h.rt.resources.descendantUrns(tenantUrn("beta"));

    await expect(
      h.engine.submit({
        tenant: "acme",
        text: "mine now",
        actor: PERSON,
        conversationUrn: beta.conversationUrn,
      }),
    ).rejects.toThrow(/may not write .*belongs to tenant beta, not to acme/);
    await expect(h.engine.cancel(beta.rootTaskId, PERSON, "not yours", ACME)).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(h.engine.result(beta.rootTaskId, { actor: PERSON, caller: ACME })).rejects.toBeInstanceOf(
      ForbiddenError,
    );
    await expect(
      h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON, ACME),
    ).rejects.toBeInstanceOf(ForbiddenError);
    // An assistant of acme (a URN of acme) is refused the same way, whatever tenant it claims.
    const acmeAgent: Actor = { id: "cld:common.Tenant.acme/common.Assistant.generalist", kind: "agent" };
    await expect(h.engine.result(beta.rootTaskId, { actor: acmeAgent, caller: BETA })).rejects.toBeInstanceOf(
      ForbiddenError,
    );

    // Nothing was written, and beta's request still waits for its own person.
    expect(await h.rt.resources.descendantUrns(tenantUrn("beta"))).toEqual(before);
    expect((await h.rt.tasks.view(beta.rootTaskId))?.status).toBe("awaiting_user");

    // Beta's person reads, answers and sees the request finish.
    expect((await h.engine.result(beta.rootTaskId, { actor: BETA_PERSON, caller: BETA })).view?.status).toBe(
      "awaiting_user",
    );
    await h.engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, BETA_PERSON, BETA);
    await h.idle();
    // Nobody fits "Offsite" well enough: beta's person picks beta's assistant.
    const [assign] = await h.pending(beta.rootTaskId);
    expect(assign?.options?.map((o) => o.id)).toEqual(["cld:common.Tenant.beta/common.Assistant.generalist"]);
    await h.engine.respond(
      assign?.meta.id as string,
      { selectedOptionId: "cld:common.Tenant.beta/common.Assistant.generalist" },
      BETA_PERSON,
      BETA,
    );
    await h.idle();
    expect(await h.engine.result(beta.rootTaskId, { actor: BETA_PERSON, caller: BETA })).toMatchObject({
      view: { status: "done" },
    });
  });

  it("a message goes only into an existing conversation of the caller's tenant", async () => {
    const { h } = await twoTenants();
    const first = await h.submit("Hello");
    await h.idle();
    await expect(
      h.engine.submit({ tenant: "acme", text: "x", actor: PERSON, conversationUrn: first.rootTaskId }),
    ).rejects.toBeInstanceOf(ValidationError);
    const nope = "cld:common.Tenant.acme/common.Conversation.nope";
    // One the person did not start (here: none at all) is refused before anything is read, so
    // the refusal says nothing of what exists; an admin, who may write anywhere in the tenant,
    // learns that there is none.
    await expect(
      h.engine.submit({ tenant: "acme", text: "x", actor: PERSON, conversationUrn: nope }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      h.engine.submit({ tenant: "acme", text: "x", actor: PERSON, roles: ["admin"], conversationUrn: nope }),
    ).rejects.toBeInstanceOf(NotFoundError);
    const again = await h.engine.submit({
      tenant: "acme",
      text: "And again",
      actor: PERSON,
      conversationUrn: first.conversationUrn,
    });
    expect(again.conversationUrn).toBe(first.conversationUrn);
  });

  it("an assistant's tools cannot reach a tenant whose name merely starts with its own", async () => {
    const { h } = await twoTenants();
    const elsewhere = withMeta({ type: "common.Conversation", name: "secret", parent: tenantUrn("acme2") });
    await h.rt.resources.put({ meta: elsewhere, title: "acme2's plans" });
    const context = {
      taskId: "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.t",
      actor: "cld:common.Tenant.acme/common.Assistant.generalist",
      callId: "c1",
      allowedTools: ["read_resource", "search_resources"],
    };
    const read = await h.engine.deps.tools.execute("read_resource", { urn: elsewhere.id }, context);
    expect(read).toMatchObject({ isError: true, content: expect.stringMatching(/belongs to tenant acme2/) });
    const listed = await h.engine.deps.tools.execute(
      "search_resources",
      { urnPrefix: tenantUrn("acme2") },
      context,
    );
    expect(listed).toMatchObject({
      isError: true,
      content: expect.stringMatching(/belongs to tenant acme2/),
    });
    expect(JSON.stringify([read, listed])).not.toContain("acme2's plans");
  });
});

describe("ResourceAccess", () => {
  const tenantId = fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,19}$/);
  /** Two different tenants; often one's name starts with the other's. */
  const tenantPair = fc
    .tuple(
      tenantId,
      fc.oneof(
        tenantId,
        tenantId.map((s) => `-${s}`),
        fc.constantFrom("2", "-x", "_1"),
      ),
    )
    .map(([a, b]) => (b.startsWith("-") || b.length <= 2 ? [a, a + b] : [a, b]) as [string, string])
    .filter(([a, b]) => a !== b);
  const element = fc.tuple(
    fc.constantFrom("common.Conversation", "common.Message", "plan.Task", "uip.Interaction", "common.Tool"),
    fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/),
  );
  const path = fc.array(element, { minLength: 0, maxLength: 4 });
  const urnIn = (tenant: string, elements: [string, string][]) =>
    [tenantUrn(tenant), ...elements.map(([type, id]) => `${type}.${id}`)].join("/");
  // A person with the admin role, or an assistant: both may act on anything of their own tenant.
  const principal = (tenant: string, kind: "human" | "agent"): Principal =>
    kind === "human"
      ? { id: "user_x", kind, tenant, roles: ["admin"] }
      : { id: `cld:common.Tenant.${tenant}/common.Assistant.a`, kind, tenant };

  it("refuses every read, listing and write of another tenant's URNs, under the default policy and one that allows all", async () => {
    h = await Harness.create({ script: () => ({ content: "" }), assistants: [] });
    const resources = h.rt.resources;
    for (const policy of [defaultPolicy(), ALLOW_ALL, undefined]) {
      const access = new ResourceAccess(resources, policy);
      await fc.assert(
        fc.asyncProperty(
          tenantPair,
          path,
          fc.constantFrom("human", "agent"),
          async ([mine, theirs], p, kind) => {
            const who = principal(mine, kind as "human" | "agent");
            const target = urnIn(theirs, p);
            await expect(access.read(who, target)).rejects.toBeInstanceOf(ForbiddenError);
            await expect(access.list(who, target)).rejects.toBeInstanceOf(ForbiddenError);
            const meta = withMeta({ type: "common.Conversation", name: "c", parent: tenantUrn(theirs) });
            await expect(access.write(who, { meta })).rejects.toBeInstanceOf(ForbiddenError);
            expect(await resources.get(meta.id)).toBeUndefined(); // nothing was written
            // Its own tenant is open to it (the default policy allows a tenant its own resources).
            await expect(access.read(who, urnIn(mine, p))).resolves.toBeUndefined();
          },
        ),
        { numRuns: 150 },
      );
    }
  });

  it("lets its own tenant in, and the policy decide within it: a refusal names its decision", async () => {
    h = await Harness.create({ script: () => ({ content: "" }), assistants: [] });
    const meta = withMeta({ type: "common.Conversation", name: "c", parent: tenantUrn("acme") });
    const who = principal("acme", "human");
    const open = new ResourceAccess(h.rt.resources, defaultPolicy());
    await open.write(who, { meta, title: "ours" });
    expect(await open.read(who, meta.id)).toMatchObject({ title: "ours" });
    expect(await open.list(who, tenantUrn("acme"))).toContain(meta.id);

    const readOnly = new ResourceAccess(
      h.rt.resources,
      new CedarPolicyEngine(
        'permit (principal, action == Arbor::Action::"resource.read", resource) when { principal has tenant && principal.tenant == resource.tenant };',
        "a read-only policy",
      ),
    );
    expect(await readOnly.read(who, meta.id)).toMatchObject({ title: "ours" });
    const refused = await readOnly.write(who, { meta, title: "changed" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ForbiddenError);
    expect((refused as ForbiddenError).message).toMatch(/may not write .* \(policy decision .+\)/);
    expect((refused as ForbiddenError).details).toMatchObject({ decisionId: expect.any(String) });
    expect(await h.rt.resources.get(meta.id)).toMatchObject({ title: "ours" });
  });

  it("leaves URNs outside any tenant, and malformed ones, to the engine", async () => {
    h = await Harness.create({ script: () => ({ content: "" }), assistants: [] });
    const access = new ResourceAccess(h.rt.resources, ALLOW_ALL);
    const who = principal("acme", "human");
    await expect(access.read(who, "cld:common.Conversation.c1")).rejects.toThrow(/belongs to no tenant/);
    await expect(access.read(who, "cld:common.Tenant.acme/../beta")).rejects.toThrow(/Invalid URN/);
    await expect(
      access.read({ id: "system_engine", kind: "system" }, "cld:common.Conversation.c1"),
    ).resolves.toBe(undefined);
  });
});
