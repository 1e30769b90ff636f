import fc from "fast-check";
import { describe, expect, it } from "vitest";
import * as z from "zod";
import { TaskStateSchema } from "../../../../shared/domain/resources.ts";
import { prepareCall } from "../../../../shared/engine/turn/activities.ts";
import type { ToolContext, ToolDescriptor } from "../../../../shared/ports/tools.ts";
import {
  ACTIVITIES,
  activityBinding,
  defineActivity,
  readStoredOutcome,
} from "../../../../shared/tools/activities/activities.ts";
import {
  parseOutputPath,
  splitMeta,
  withOutputPath,
} from "../../../../shared/tools/activities/activity-paths.ts";
import { ToolFunctionRequestSchema } from "../../../../shared/tools/bindings/tool-function-protocol.ts";

describe("parseOutputPath", () => {
  it("reads plain and branching state paths, with the seeds' † marker", () => {
    expect(parseOutputPath("state.forecast")).toEqual({ ok: true, paths: ["state.forecast"] });
    expect(parseOutputPath("†state.sunny || †state.rainy")).toEqual({
      ok: true,
      paths: ["state.sunny", "state.rainy"],
    });
    expect(parseOutputPath("state.a.b.c.d")).toEqual({ ok: true, paths: ["state.a.b.c.d"] });
  });

  it.each([
    [42, /must be a string/],
    ["", /is not a state path/],
    ["state", /is not a state path/],
    ["state.", /is not a state path/],
    ["other.x", /is not a state path/],
    ["state.a.b.c.d.e", /is not a state path/],
    ["state.1a", /is not a state path/],
    ["state.a-b", /is not a state path/],
    ["state.__proto__.x || state.a b", /is not a state path/],
    ["state.a ||", /is not a state path/],
    ["state.a | state.b", /is not a state path/],
    ["state.a || state.a", /names state\.a twice/],
    [Array.from({ length: 9 }, (_, i) => `state.p${i}`).join(" || "), /more than 8 alternatives/],
    [`state.${"x".repeat(600)}`, /longer than 500/],
  ])("refuses %j, saying what to write", (raw, problem) => {
    const parsed = parseOutputPath(raw);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problem).toMatch(problem);
  });

  it("never throws, and what it accepts is only identifiers under state", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 600 }), fc.anything()), (raw) => {
        const parsed = parseOutputPath(raw);
        if (parsed.ok)
          for (const p of parsed.paths) expect(p).toMatch(/^state(\.[A-Za-z_][A-Za-z0-9_]{0,63}){1,4}$/);
      }),
    );
  });
});

describe("meta-properties", () => {
  it("are taken off a call's arguments; the rest stays as given", () => {
    expect(splitMeta({ a: 1, _outputPath: "state.x", _instance: "i", _other: 2 })).toEqual({
      own: { a: 1, _other: 2 },
      meta: { _outputPath: "state.x", _instance: "i" },
    });
  });

  it("advertise _outputPath on a copy of a schema, once", () => {
    const schema = Object.freeze({ type: "object", properties: Object.freeze({ text: { type: "string" } }) });
    const advertised = withOutputPath(schema);
    expect(Object.keys(advertised.properties as object)).toEqual(["text", "_outputPath"]);
    expect(withOutputPath(advertised)).toBe(advertised);
    expect(Object.keys(schema.properties)).toEqual(["text"]);
  });
});

describe("an activity binding", () => {
  const ctx = (outputPaths?: string[]): ToolContext => ({
    taskId: "cld:common.Tenant.acme/plan.Task.t1",
    actor: "cld:common.Tenant.acme/common.Assistant.a",
    callId: "c1",
    activity: {
      call: { id: "c1", name: "cmp", arguments: {}, ...(outputPaths ? { outputPaths } : {}) },
      context: [{ role: "user", content: "the prompt" }],
    },
  });
  const cmp = activityBinding("cmp", ACTIVITIES.compare_threshold);

  it("branches: compare_threshold writes to the first path at or above, else the second", async () => {
    const offered = ["state.hot", "state.cold"];
    const hot = await cmp.run({ value: 25, threshold: 25 }, ctx(offered));
    const cold = await cmp.run({ value: 24.9, threshold: 25 }, ctx(offered));
    expect(readStoredOutcome(hot as string, offered)).toEqual({
      ok: true,
      outcome: { outputPath: "state.hot", value: { value: 25, threshold: 25, above: true } },
    });
    expect(readStoredOutcome(cold as string, offered)).toMatchObject({
      ok: true,
      outcome: { outputPath: "state.cold" },
    });
    await expect(cmp.run({ value: 1, threshold: 0 }, ctx(["state.a", "state.b", "state.c"]))).rejects.toThrow(
      /exactly two alternatives/,
    );
  });

  it("is an activity with an output schema, and advertises _outputPath", () => {
    expect(cmp.descriptor).toMatchObject({ activity: true, pure: true, outputSchema: { type: "object" } });
    expect(Object.keys(cmp.descriptor.parameters.properties as object)).toContain("_outputPath");
  });

  it("refuses a choice not offered, a missing choice when branching, and an oversized value", async () => {
    const pick = (outcome: unknown) =>
      activityBinding("pick", defineActivity({ description: "d", schema: z.object({}), run: () => outcome }));
    await expect(
      pick({ outputPath: "state.z", value: 1 }).run({}, ctx(["state.a", "state.b"])),
    ).rejects.toThrow(/chose "state\.z", which is not one of state\.a \|\| state\.b; nothing was stored/);
    await expect(pick(5).run({}, ctx(["state.a", "state.b"]))).rejects.toThrow(/must choose one/);
    await expect(pick("x".repeat(9000)).run({}, ctx(["state.a"]))).rejects.toThrow(/longer than 8000/);
    expect(await pick(5).run({}, ctx(["state.a"]))).toBe('{"outputPath":"state.a","value":5}');
    expect(await pick({ n: 5 }).run({}, ctx())).toBe('{"n":5}');
  });

  it("reading an outcome back refuses anything but a choice among those offered", () => {
    expect(readStoredOutcome("not json", ["state.a"]).ok).toBe(false);
    expect(readStoredOutcome('{"value":1}', ["state.a"]).ok).toBe(false);
    expect(readStoredOutcome('{"outputPath":"state.b","value":1}', ["state.a"]).ok).toBe(false);
    expect(readStoredOutcome('{"outputPath":"state.a","value":1,"x":2}', ["state.a"]).ok).toBe(false);
  });
});

describe("the wire and the state", () => {
  it("the tool function's ExecuteTool carries an activity's call and scoped messages, strictly", () => {
    const request = {
      op: "ExecuteTool",
      tool: "cmp",
      arguments: { value: 1, threshold: 0 },
      context: {
        taskId: "cld:common.Tenant.acme/plan.Task.t1",
        actor: "a",
        callId: "c1",
        activity: {
          call: { id: "c1", name: "cmp", arguments: {}, _outputPath: "state.a", outputPaths: ["state.a"] },
          context: [{ role: "user", content: "x" }],
        },
      },
    };
    expect(ToolFunctionRequestSchema.parse(request)).toEqual(request);
    const extra = structuredClone(request) as typeof request & { context: { activity: { call: object } } };
    Object.assign(extra.context.activity.call, { sneaky: 1 });
    expect(ToolFunctionRequestSchema.safeParse(extra).success).toBe(false);
  });

  it("a state entry's value is bounded", () => {
    const entry = {
      meta: {
        id: "cld:common.Tenant.acme/plan.Task.t1/plan.State.s1",
        name: "state.a",
        type: "plan.State",
        parent: "cld:common.Tenant.acme/plan.Task.t1",
        hash: "s1",
      },
      path: "state.a",
      source: { tool: "t", callId: "c", turn: 1 },
    };
    expect(TaskStateSchema.safeParse({ ...entry, value: { a: 1 } }).success).toBe(true);
    expect(TaskStateSchema.safeParse({ ...entry, value: "x".repeat(100_001) }).success).toBe(false);
  });
});

describe("prepareCall (the engine's side)", () => {
  const tool = (activity: boolean): ToolDescriptor => ({
    name: "t",
    kind: "builtin",
    description: "d",
    parameters: { type: "object" },
    risky: false,
    pure: true,
    ...(activity ? { activity: true } : {}),
  });
  const call = (args: Record<string, unknown>) => ({ id: "c1", name: "t", arguments: args });

  it("leaves a leaf without activities alone: nothing taken off", () => {
    expect(prepareCall(false, tool(false), call({ a: 1, _outputPath: "state.x" }))).toBeUndefined();
    expect(prepareCall(true, undefined, call({ a: 1 }))).toBeUndefined();
  });

  it("says how each call runs, with its own arguments only", () => {
    expect(prepareCall(true, tool(true), call({ a: 1 }))).toMatchObject({
      mode: "activity-fire",
      call: { arguments: { a: 1 } },
    });
    expect(prepareCall(true, tool(true), call({ a: 1, _outputPath: "state.x || state.y" }))).toMatchObject({
      mode: "activity-stored",
      call: { arguments: { a: 1 } },
      activity: { _outputPath: "state.x || state.y", outputPaths: ["state.x", "state.y"] },
    });
    expect(prepareCall(true, tool(false), call({ a: 1 }))).toMatchObject({ mode: "latent-ephemeral" });
    expect(prepareCall(true, tool(false), call({ _outputPath: "state.x || state.y" }))).toEqual({
      mode: "latent-stored",
      call: { id: "c1", name: "t", arguments: {} },
      activity: {
        id: "c1",
        name: "t",
        arguments: {},
        _outputPath: "state.x || state.y",
        outputPaths: ["state.x"],
      },
      collapsedFrom: "state.x || state.y",
    });
  });

  it.each([
    [{ _instance: { x: 1 } }, /Invalid _instance/],
    [{ _instance: "i".repeat(201) }, /Invalid _instance/],
    [{ _outputPath: ["state.x"] }, /Invalid _outputPath must be a string/],
    [{ _outputPath: "state.x\nstate.y" }, /is not a state path/],
  ])("refuses %j: an error result, nothing to run", (args, problem) => {
    const prepared = prepareCall(true, tool(true), call(args));
    expect(prepared).toEqual({ error: { content: expect.stringMatching(problem), isError: true } });
  });
});
