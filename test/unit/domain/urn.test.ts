import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ancestors,
  childUrn,
  conversationOf,
  descendantPrefix,
  deterministicId,
  isWithin,
  MAX_REMEMBERED_URNS,
  objectKey,
  parentUrn,
  parseUrn,
  rootUrn,
  tenantOf,
  tenantUrn,
  urnFromKey,
} from "../../../shared/domain/urn.ts";
import { InvalidUrnError } from "../../../shared/kernel/errors.ts";

const deep = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m2/plan.Task.t3/plan.Task.t4";

describe("URNs", () => {
  it("parses every element as package, type and id", () => {
    expect(parseUrn(deep).map((e) => `${e.pkg}|${e.type}|${e.id}`)).toEqual([
      "common|Tenant|acme",
      "common|Conversation|c1",
      "common|Message|m2",
      "plan|Task|t3",
      "plan|Task|t4",
    ]);
  });

  it("knows parents, ancestors (root first), roots and tenants", () => {
    expect(parentUrn(deep)).toBe(
      "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m2/plan.Task.t3",
    );
    expect(parentUrn("cld:common.Tenant.acme")).toBeUndefined();
    expect(ancestors(deep)).toEqual([
      "cld:common.Tenant.acme",
      "cld:common.Tenant.acme/common.Conversation.c1",
      "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m2",
      "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m2/plan.Task.t3",
    ]);
    expect(rootUrn(deep)).toBe("cld:common.Tenant.acme");
    expect(tenantOf(deep)).toBe("acme");
    expect(tenantOf("cld:common.Conversation.c1")).toBeUndefined();
    expect(tenantUrn("acme")).toBe("cld:common.Tenant.acme");
  });

  it("makes a tenant's URN only of one tenant id: a path, a dot or nothing is refused", () => {
    // Each of these formed a valid URN of its own before (two elements, below the tenant) or an
    // odd one; a caller taking the id from a request would have acted on what it names.
    for (const bad of [
      "acme/common.Conversation.c1",
      "acme/common.Tenant.beta",
      "acme/",
      "a.b",
      "",
      "x".repeat(129),
      "acme\n",
      " acme",
    ])
      expect(() => tenantUrn(bad), bad).toThrow(/the tenant id must match/);
    expect(() => tenantUrn(undefined as unknown as string)).toThrow(InvalidUrnError);
    expect(tenantUrn("a_b-C9")).toBe("cld:common.Tenant.a_b-C9");
  });

  it("names the conversation a tenant's URN lies in (itself when it is one), from the URN alone", () => {
    const conversation = "cld:common.Tenant.acme/common.Conversation.c1";
    expect(conversationOf(deep)).toBe(conversation);
    expect(conversationOf(conversation)).toBe(conversation);
    expect(conversationOf("cld:common.Tenant.acme")).toBeUndefined();
    expect(conversationOf("cld:common.Tenant.acme/common.Assistant.a")).toBeUndefined();
    expect(conversationOf("cld:common.Conversation.c1/common.Conversation.c2")).toBeUndefined();
    expect(() => conversationOf("cld:common.Tenant.acme/../x")).toThrow(InvalidUrnError);
  });

  it("compares whole elements, so one tenant's prefix never covers another's", () => {
    expect(isWithin(deep, "cld:common.Tenant.acme")).toBe(true);
    expect(isWithin("cld:common.Tenant.acme-evil/common.Conversation.c1", "cld:common.Tenant.acme")).toBe(
      false,
    );
    expect(descendantPrefix("cld:common.Tenant.acme")).toBe("cld:common.Tenant.acme/");
  });

  it("maps URNs to object keys and back", () => {
    expect(objectKey(deep)).toBe(`${deep}.json`);
    expect(urnFromKey(`${deep}.json`)).toBe(deep);
    expect(urnFromKey(`${deep}.txt`)).toBeUndefined();
    expect(urnFromKey("cld:nonsense.json")).toBeUndefined();
  });

  it.each([
    ["", /empty/],
    ["urn:common.Tenant.a", /must start with "cld:"/],
    ["cld:", /no path/],
    ["cld:common.Tenant", /element 1/],
    ["cld:Common.Tenant.a", /package/],
    ["cld:common.tenant.a", /type/],
    ["cld:common.Tenant.a b", /id/],
    ["cld:common.Tenant.a//plan.Task.b", /element 2/],
    ["cld:common.Tenant.a/plan.Task.b.c", /element 2/],
    [`cld:common.Tenant.${"x".repeat(1001)}`, /longer than/],
  ])("rejects %j with a message saying what is wrong", (urn, reason) => {
    expect(() => parseUrn(urn)).toThrow(InvalidUrnError);
    expect(() => parseUrn(urn)).toThrow(reason);
  });

  it("derives the same id from the same parent, type and name, and different ids otherwise", () => {
    const a = deterministicId("cld:common.Tenant.acme", "plan.Task", "research");
    expect(deterministicId("cld:common.Tenant.acme", "plan.Task", "research")).toBe(a);
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(deterministicId("cld:common.Tenant.acme", "plan.Task", "write")).not.toBe(a);
    expect(deterministicId("cld:common.Tenant.other", "plan.Task", "research")).not.toBe(a);
    // No ambiguity from concatenation: ("ab","c") and ("a","bc") differ.
    expect(deterministicId(undefined, "ab", "c")).not.toBe(deterministicId(undefined, "a", "bc"));
  });

  it("remembers at most MAX_REMEMBERED_URNS parsed URNs, the newest, forgetting the oldest first", () => {
    // A remembered URN hands out the same frozen elements each time; a forgotten one is parsed anew.
    const urn = (i: number) => `cld:common.Tenant.remember/common.Conversation.c${i}/plan.Task.t${i}`;
    const same = (u: string) => {
      const [a, b] = [parseUrn(u)[2], parseUrn(u)[2]];
      return a === b;
    };
    const first = parseUrn(urn(0))[2];
    expect(same(urn(0))).toBe(true);
    for (let i = 1; i < MAX_REMEMBERED_URNS + 200; i++) parseUrn(urn(i));
    // Past the limit the oldest went (a tenth at a time), not everything (the hot ones stay hot).
    expect(parseUrn(urn(0))[2]).not.toBe(first);
    expect(parseUrn(urn(0))[2]).toEqual(first);
    for (const i of [MAX_REMEMBERED_URNS / 2, MAX_REMEMBERED_URNS - 1, MAX_REMEMBERED_URNS + 199])
      expect(same(urn(i))).toBe(true);
  });

  it("checks the element a child URN adds, and the length it reaches", () => {
    const parent = "cld:common.Tenant.acme";
    expect(() => childUrn(parent, { pkg: "plan", type: "task", id: "t1" })).toThrow(/type "task" must match/);
    expect(() => childUrn(parent, { pkg: "plan", type: "Task", id: "a.b" })).toThrow(/must be <package>/);
    let deep = parent;
    const add = () => {
      deep = childUrn(deep, { pkg: "plan", type: "Task", id: "x".repeat(100) });
    };
    for (let i = 0; i < 8; i++) add();
    expect(add).toThrow(/longer than 1000 characters/);
    expect(parentUrn(deep)).toBe(deep.slice(0, deep.lastIndexOf("/")));
  });

  it("round-trips any valid element path (property)", () => {
    const element = fc.record({
      pkg: fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/),
      type: fc.stringMatching(/^[A-Z][A-Za-z0-9]{0,8}$/),
      id: fc.stringMatching(/^[A-Za-z0-9_-]{1,20}$/),
    });
    fc.assert(
      fc.property(fc.array(element, { minLength: 1, maxLength: 6 }), (elements) => {
        let urn: string | undefined;
        for (const e of elements) urn = childUrn(urn, e);
        const parsed = parseUrn(urn as string);
        expect(parsed).toEqual(elements);
        expect(ancestors(urn as string)).toHaveLength(elements.length - 1);
      }),
    );
  });
});
