import { describe, expect, it } from "vitest";
import { parseResource, TaskSpecSchema, toDescription, withMeta } from "../../../shared/domain/resources.ts";
import { tenantUrn } from "../../../shared/domain/urn.ts";
import { ValidationError } from "../../../shared/kernel/errors.ts";

const tenant = tenantUrn("acme");

describe("resources", () => {
  it("withMeta builds a deterministic URN from parent, type and name", () => {
    const a = withMeta({ type: "common.Conversation", name: "chat", parent: tenant });
    const b = withMeta({ type: "common.Conversation", name: "chat", parent: tenant });
    expect(a.id).toBe(b.id);
    expect(a.id).toBe(`${tenant}/common.Conversation.${a.hash}`);
    expect(a.parent).toBe(tenant);
    expect(withMeta({ type: "common.Tenant", name: "acme", id: "acme" }).id).toBe(tenant);
  });

  it("toDescription compiles the four descriptors in a fixed order, skipping empty ones", () => {
    expect(toDescription({ evaluation: "cites sources", purpose: "research a topic" })).toBe(
      "**Purpose:** research a topic\n\n**Evaluation:** cites sources",
    );
    expect(toDescription({})).toBe("");
  });

  it("reconstructs the right type from meta.type", () => {
    const meta = withMeta({
      type: "common.Assistant",
      name: "researcher",
      parent: tenant,
      purpose: "find facts",
    });
    const r = parseResource({ meta, tools: ["search"] });
    expect(r.meta.type).toBe("common.Assistant");
    expect(r).toMatchObject({ tools: ["search"], limits: {} });
  });

  it("names an unknown type and lists the known ones", () => {
    expect(() => parseResource({ meta: { type: "common.Nope" } })).toThrow(/common\.Nope.*common\.Tenant/);
    expect(() => parseResource(null)).toThrow(ValidationError);
  });

  it("holds messages to their role rules", () => {
    const meta = withMeta({ type: "common.Message", name: "m", parent: tenant });
    const call = { id: "c1", name: "sha256", arguments: { text: "x" } };
    expect(() => parseResource({ meta, role: "assistant", toolCalls: [call] })).not.toThrow();
    expect(() => parseResource({ meta, role: "user", toolCalls: [call] })).toThrow(/only assistant messages/);
    expect(() => parseResource({ meta, role: "tool", content: "42" })).toThrow(/which call it answers/);
    expect(() => parseResource({ meta, role: "user" })).toThrow(/content or tool calls/);
    expect(() =>
      parseResource({ meta, role: "assistant", toolCalls: [{ ...call, name: "bad name!" }] }),
    ).toThrow(/tool names/);
  });

  it("accepts a recursive task plan and rejects a bad node deep inside it", () => {
    const plan = {
      name: "root",
      subtasks: [{ name: "a", subtasks: [{ name: "a1", priority: "foreground" }] }],
    };
    expect(TaskSpecSchema.parse(plan)).toEqual(plan);
    const bad = TaskSpecSchema.safeParse({
      name: "root",
      subtasks: [{ name: "a", subtasks: [{ name: "" }] }],
    });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.path).toEqual(["subtasks", 0, "subtasks", 0, "name"]);
  });

  it("checks that meta agrees with its own URN", () => {
    const meta = withMeta({ type: "plan.Task", name: "t", parent: tenant });
    expect(() => parseResource({ meta: { ...meta, hash: "other" } })).toThrow(/meta\.hash/);
  });
});
