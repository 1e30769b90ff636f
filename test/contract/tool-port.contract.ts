import { afterEach, beforeEach, describe, expect, it } from "vitest";
import * as z from "zod";
import { ValidationError } from "../../shared/kernel/errors.ts";
import type { AuditLog } from "../../shared/ports/audit-log.ts";
import type { ToolBinding, ToolContext, ToolPort } from "../../shared/ports/tools.ts";
import type { ResourceStore } from "../../shared/store/resource-store.ts";
import { activityBinding, defineActivity } from "../../shared/tools/activities/activities.ts";
import { callbackOf, newCallback } from "../../shared/tools/bindings/a2a-push-client.ts";
import { idempotencyKeyOf } from "../../shared/tools/service/call-record.ts";
import { jsonSchemaChecker } from "../../shared/tools/service/json-schema.ts";
import { toolResource, toolUrn } from "../../shared/tools/service/tool-registry.ts";
import { ASSISTANT, TASK } from "../scenarios/tool-world.ts";
import { until } from "../support/until.ts";

/**
 * The one contract every ToolPort passes: the in-process ToolService (local mode) and the
 * Lambda-backed port of the engine's steps on AWS, which sends each call to the real tool function
 * handler (functions/tool.ts) through the real Lambda client. The setup builds a port over the
 * bindings below, with the default policy deciding, on an audit log and resource store the test
 * reads too (on AWS the tool function and the steps share the state table and the bucket).
 */
export interface ToolPortSetup {
  port: ToolPort;
  audit: AuditLog;
  resources: ResourceStore;
  close(): Promise<void>;
}

/** Arbor's public URL for the contract's callbacks: a port that makes them (ToolFunctionPort) is given it. */
export const CONTRACT_PUBLIC_URL = "https://arbor.example.com";

/** What the bindings saw: every run, with the context the tool got. */
export interface ToolRuns {
  runs: { tool: string; args: Record<string, unknown>; context: ToolContext }[];
  /** What the activity `branch` was given: `(call, tool, context)`, as its handler saw them. */
  activities: { call: unknown; tool: unknown; context: unknown }[];
  /** The push URLs `remote_desk` gave its agent. */
  pushUrls: string[];
  /** `slow` waits for this to be called. */
  release: () => void;
}

const HUGE = 100_000;

/** The tools every port is set up with. */
export function contractBindings(): { bindings: ToolBinding[]; seen: ToolRuns } {
  let release = () => {};
  const seen: ToolRuns = { runs: [], activities: [], pushUrls: [], release: () => release() };
  const tool = (
    name: string,
    parameters: Record<string, unknown>,
    run: (args: Record<string, unknown>) => Promise<string> | string,
    extra: { risky?: boolean; namespace?: string } = {},
  ): ToolBinding => ({
    descriptor: {
      name,
      kind: "http",
      description: `The contract's ${name}`,
      parameters,
      risky: extra.risky ?? false,
      pure: false,
      ...(extra.namespace ? { namespace: extra.namespace } : {}),
    },
    check: jsonSchemaChecker(parameters, `tools.${name}`),
    run: async (args, context) => {
      seen.runs.push({ tool: name, args, context });
      return run(args);
    },
  });
  const text = {
    type: "object",
    properties: { text: { type: "string", minLength: 1 } },
    required: ["text"],
    additionalProperties: false,
  };
  // A remote agent that pushes (as tools/bindings/a2a-agent.ts with a card that offers push): the call is
  // handed off with the caller's callback (ToolContext.callback) or one it makes and records
  // through handOff; without either it waits. Its push is `{ taskId, state }`.
  const remote: ToolBinding = {
    ...tool("remote_desk", text, () => ""),
    descriptor: {
      name: "remote_desk",
      kind: "a2a",
      description: "The contract's remote agent that pushes",
      parameters: text,
      risky: false,
      pure: false,
      namespace: "desks",
    },
    run: async (args, context) => {
      seen.runs.push({ tool: "remote_desk", args, context });
      const callback = context.callback
        ? callbackOf(context.callback)
        : context.handOff
          ? newCallback(CONTRACT_PUBLIC_URL)
          : undefined;
      if (!callback) return `remote: ${String(args.text)} (waited)`;
      if (!context.callback)
        await context.handOff?.({ callbackId: callback.callbackId, tokenHash: callback.tokenHash });
      seen.pushUrls.push(callback.config.url);
      return {
        kind: "remote-task-handed-off",
        callbackId: callback.callbackId,
        tokenHash: callback.tokenHash,
        remoteTaskId: `remote-${String(args.text)}`,
      };
    },
    settle: async (remoteTaskId, pushed) => {
      if (pushed === undefined) return `asked: ${remoteTaskId} is done`;
      const push = pushed as { taskId?: string; state?: string };
      if (push.taskId !== remoteTaskId)
        throw new ValidationError(`The push is about task ${push.taskId}, not ${remoteTaskId}`);
      return push.state === "working" ? undefined : `pushed: ${remoteTaskId} ${push.state}`;
    },
  };
  const bindings = [
    tool("echo", text, (args) => `echo: ${String(args.text)}`, { namespace: "notes" }),
    tool("send_note", text, (args) => `sent: ${String(args.text)}`, { risky: true, namespace: "notes" }),
    tool("boom", { type: "object" }, () => {
      throw new Error("kaput, the backend is down");
    }),
    tool("huge", { type: "object" }, () => "z".repeat(HUGE)),
    tool(
      "slow",
      { type: "object" },
      () =>
        new Promise<string>((resolve) => {
          release = () => resolve("slow: done");
        }),
    ),
    remote,
    // An activity (tools/activities/activities.ts): stores to the first path offered when `go`, else the second.
    activityBinding(
      "branch",
      defineActivity({
        description: "The contract's activity",
        schema: z.object({ go: z.boolean() }),
        output: { type: "boolean" },
        run: (call, tool, context) => {
          seen.activities.push({ call, tool, context });
          const [yes, no] = call.outputPaths ?? [];
          return yes && no
            ? { outputPath: call.arguments.go ? yes : no, value: call.arguments.go }
            : "no paths";
        },
      }),
    ),
  ];
  return { bindings, seen };
}

export function toolPortContract(
  name: string,
  setup: (bindings: ToolBinding[]) => Promise<ToolPortSetup>,
): void {
  describe(`ToolPort contract: ${name}`, () => {
    let s: ToolPortSetup;
    let seen: ToolRuns;
    let n = 0;
    const ALL = ["echo", "send_note", "boom", "huge", "slow", "remote_desk", "branch"];
    const context = (allowedTools: readonly string[] = ALL): ToolContext => ({
      taskId: TASK,
      actor: ASSISTANT,
      callId: `call_${name.length}_${++n}`,
      allowedTools,
    });
    const stages = async (callId: string) =>
      (await s.audit.forTask(TASK))
        .filter((r) => r.callId === callId)
        .map((r) => `${r.stage}:${r.attempt ?? 1}${r.reason ? `:${r.reason}` : ""}`);

    beforeEach(async () => {
      const made = contractBindings();
      seen = made.seen;
      s = await setup(made.bindings);
    });
    afterEach(async () => {
      seen.release();
      await s.close();
    });

    it("lists every tool by name, with its schema and what it is; describes the known ones, frozen", () => {
      expect(
        s.port
          .list()
          .map((d) => d.name)
          .sort(),
      ).toEqual([...ALL].sort());
      const [echo, ...rest] = s.port.describe(["echo", "no_such_tool"]);
      expect(rest).toEqual([]);
      expect(echo).toMatchObject({
        name: "echo",
        kind: "http",
        risky: false,
        pure: false,
        parameters: { required: ["text"] },
      });
      expect(s.port.describe(["send_note"])[0]?.risky).toBe(true);
      expect(Object.isFrozen(echo)).toBe(true);
    });

    const listed = async (tenant: string, namespace?: string) =>
      (await listTools(tenant, namespace)).map((d) => d.name);
    const listTools = (tenant: string, namespace?: string) => {
      if (!s.port.listTools) throw new Error(`${name} has no listTools`);
      return s.port.listTools(tenant, namespace === undefined ? {} : { namespace });
    };

    it("ListTools: the tenant's stored Tool resources, by name, of one namespace or all", async () => {
      expect(await listed("acme")).toEqual([...ALL].sort());
      expect(await listed("acme", "notes")).toEqual(["echo", "send_note"]);
      expect(await listed("acme", "http")).toEqual(["boom", "huge", "slow"]); // no namespace: the kind
      expect(await listed("acme", "desks")).toEqual(["remote_desk"]);
      expect(await listed("acme", "nothing-here")).toEqual([]);
      const [echo] = await listTools("acme", "notes");
      expect(echo).toMatchObject({ name: "echo", namespace: "notes", kind: "http", risky: false });
      // Written by the registration: one resource per tool under the tenant, without settings.
      const stored = await s.resources.getAs("common.Tool", toolUrn("acme", "send_note"));
      expect(stored).toMatchObject({
        namespace: "notes",
        risky: true,
        binding: { kind: "http", config: {} },
        function: { name: "send_note", parameters: { required: ["text"] } },
      });
    });

    it("ListTools answers from the stored resources, never from memory, and never across tenants", async () => {
      await listTools("acme");
      await listTools("beta");
      // What the store says is what is listed: a resource changed, one gone, one only beta has.
      const [echo] = s.port.describe(["echo"]);
      if (!echo) throw new Error("echo is configured");
      await s.resources.put({
        ...toolResource("acme", echo),
        function: { ...toolResource("acme", echo).function, description: "changed in the store" },
      });
      await s.resources.delete(toolUrn("acme", "huge"));
      await s.resources.put(toolResource("beta", { ...echo, name: "beta_only", namespace: "notes" }));
      const acme = await listTools("acme");
      expect(acme.find((d) => d.name === "echo")?.description).toBe("changed in the store");
      expect(acme.map((d) => d.name)).not.toContain("huge");
      expect(acme.map((d) => d.name)).not.toContain("beta_only");
      expect(await listed("beta", "notes")).toEqual(["beta_only", "echo", "send_note"]);
      // The configured tools are still what runs: the port's own list is unchanged.
      expect(s.port.list().map((d) => d.name)).toContain("huge");
    });

    it("refuses a namespace that is not one, saying what one is, and writes nothing", async () => {
      for (const bad of ["../notes", "*", "notes/*", "x".repeat(10_000), "ñotes", "Notes", "", " "]) {
        await expect(listTools("gamma", bad)).rejects.toThrow(ValidationError);
        await expect(listTools("gamma", bad)).rejects.toThrow(/a namespace is 1-64 of a-z 0-9 _ -/);
      }
      expect(await s.resources.childUrns("cld:common.Tenant.gamma", "common.Tool")).toEqual([]);
    });

    it("registers a tenant's tools once however many ask at once: one set, the configuration's", async () => {
      if (!s.port.register) throw new Error(`${name} has no register`);
      const [first, second] = await Promise.all([
        s.port.register("delta"),
        s.port.register("delta"),
        listTools("delta"),
      ]);
      expect(second.registryHash).toBe(first.registryHash);
      expect(first.urns.sort()).toEqual(ALL.map((n) => toolUrn("delta", n)).sort());
      expect(await s.resources.childUrns("cld:common.Tenant.delta", "common.Tool")).toEqual(
        ALL.map((n) => toolUrn("delta", n)).sort(),
      );
      expect(await s.port.register("delta")).toMatchObject({ registryHash: first.registryHash });
    });

    it("runs an activity with its call, its own descriptor and the scoped messages, and says it is one", async () => {
      const [branch] = s.port.describe(["branch"]);
      expect(branch).toMatchObject({ activity: true, outputSchema: { type: "boolean" } });
      expect(Object.keys(branch?.parameters.properties as object)).toEqual(["go", "_outputPath"]);
      const c = context();
      const call = {
        id: c.callId,
        name: "branch",
        arguments: { go: false },
        _outputPath: "state.yes || state.no",
        _instance: "first",
        outputPaths: ["state.yes", "state.no"],
      };
      const scoped = [
        { role: "user" as const, content: "# Task: decide", urn: `${TASK}/common.Message.p` },
        { role: "assistant" as const, content: "[calls: branch]" },
      ];
      const result = await s.port.execute(
        "branch",
        { go: false },
        { ...c, activity: { call, context: scoped } },
      );
      expect(result).toEqual({ content: '{"outputPath":"state.no","value":false}' });
      expect(seen.activities).toEqual([
        { call, tool: expect.objectContaining({ name: "branch", activity: true }), context: scoped },
      ]);
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);
    });

    it("executes a call: the result, and the call on record as requested then completed", async () => {
      const c = context();
      expect(await s.port.execute("echo", { text: "hello" }, c)).toEqual({ content: "echo: hello" });
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);
      expect(seen.runs.map((r) => r.tool)).toEqual(["echo"]);
    });

    it("waits for what the caller must have on record first (after): nothing recorded or run before; a failed one starts nothing", async () => {
      let done = () => {};
      const c = { ...context(), after: new Promise<void>((resolve) => (done = resolve)) };
      const call = s.port.execute("echo", { text: "hello" }, c);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(seen.runs).toEqual([]);
      expect(await stages(c.callId)).toEqual([]);
      done();
      expect(await call).toEqual({ content: "echo: hello" });
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);

      const failed = { ...context(), after: Promise.reject(new Error("the turn was not written")) };
      await expect(s.port.execute("echo", { text: "again" }, failed)).rejects.toThrow(/not written/);
      expect(await stages(failed.callId)).toEqual([]);
      expect(seen.runs.map((r) => r.args.text)).toEqual(["hello"]);
    });

    it("refuses invalid arguments, naming the field; the tool does not run", async () => {
      expect(s.port.check("echo", { text: "" })).toEqual([expect.stringMatching(/^text: /)]);
      expect(s.port.check("echo", { text: "ok" })).toEqual([]);
      const c = context();
      const result = await s.port.execute("echo", { txt: "hello" }, c);
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/^Invalid arguments for echo: .*text: is required/);
      expect(await stages(c.callId)).toEqual(["failed:1:invalid_arguments"]);
      expect(seen.runs).toEqual([]);
    });

    it("refuses what the policy does not allow (a tool the assistant is not given); the tool does not run", async () => {
      const c = context(["boom"]);
      const result = await s.port.execute("echo", { text: "hello" }, c);
      expect(result).toEqual({
        content: expect.stringMatching(/^Policy does not allow .*common\.Assistant\.a1 to call echo/),
        isError: true,
      });
      expect(await stages(c.callId)).toEqual(["failed:1:denied"]);
      expect(seen.runs).toEqual([]);
    });

    it("answers an unknown tool with the tools there are", async () => {
      const c = context([...ALL, "no_such_tool"]);
      const result = await s.port.execute("no_such_tool", {}, c);
      expect(result.isError).toBe(true);
      expect(result.content).toMatch(/^Unknown tool "no_such_tool"\. Use one of: echo, send_note/);
      expect(await stages(c.callId)).toEqual(["failed:1:unknown_tool"]);
    });

    it("turns a throwing tool into a failed call the model reads, on record", async () => {
      const c = context();
      expect(await s.port.execute("boom", {}, c)).toEqual({
        content: "boom failed: kaput, the backend is down",
        isError: true,
      });
      expect(await stages(c.callId)).toEqual(["requested:1", "failed:1:error"]);
    });

    it("stores a huge result as a resource and passes its URN and start", async () => {
      const c = context();
      const result = await s.port.execute("huge", {}, c);
      expect(result.isError).toBeUndefined();
      expect(result.content.length).toBeLessThan(3_000);
      const urn = /stored as (\S+)\. Its start/.exec(result.content)?.[1] ?? "";
      expect(urn.startsWith(`${TASK}/common.Message.`)).toBe(true);
      const stored = (await s.resources.get(urn)) as { content?: string } | undefined;
      expect(stored?.content).toHaveLength(HUGE);
      const records = (await s.audit.forTask(TASK)).filter((r) => r.callId === c.callId);
      expect(records.at(-1)).toMatchObject({ stage: "completed", resultUrn: urn, resultChars: HUGE });
    });

    it("gives every attempt of one call the same idempotency key, numbered, and says so in the history", async () => {
      const c = context();
      const key = idempotencyKeyOf(TASK, c.callId);
      expect(await s.port.history(TASK, c.callId)).toEqual({ attempts: 0, idempotencyKey: key });
      await s.port.execute("send_note", { text: "hi" }, c);
      await s.port.execute("send_note", { text: "hi" }, c); // a step re-driven runs the call again
      expect(seen.runs.map((r) => [r.context.idempotencyKey, r.context.attempt])).toEqual([
        [key, 1],
        [key, 2],
      ]);
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1", "requested:2", "completed:2"]);
      expect(await s.port.history(TASK, c.callId)).toMatchObject({
        attempts: 2,
        last: "completed",
        idempotencyKey: key,
      });
    });

    it("hands a call to a remote agent that pushes: pending with the recorded callback, then settled once by its push", async () => {
      const c = context();
      const handedOff: { callbackId: string; tokenHash: string }[] = [];
      const handOff = async (callback: { callbackId: string; tokenHash: string }) => {
        handedOff.push(callback);
      };
      const result = await s.port.execute("remote_desk", { text: "venue" }, { ...c, handOff });
      // The callback was on record (handOff) before the agent got it, under Arbor's public URL.
      expect(handedOff).toHaveLength(1);
      const [callback] = handedOff;
      expect(seen.pushUrls).toEqual([`${CONTRACT_PUBLIC_URL}/v1/a2a-callbacks/${callback?.callbackId}`]);
      expect(result).toEqual({
        content: "remote_desk: the remote agent is working on task remote-venue",
        pending: {
          callbackId: callback?.callbackId,
          tokenHash: callback?.tokenHash,
          remoteTaskId: "remote-venue",
          deadline: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          attempt: 1,
          argumentsHash: expect.any(String),
        },
      });
      expect(await stages(c.callId)).toEqual(["requested:1"]);
      const pending = result.pending as NonNullable<typeof result.pending>;

      // Still working: nothing recorded. About another task: refused, nothing recorded.
      expect(
        await s.port.settle?.("remote_desk", pending, { taskId: "remote-venue", state: "working" }, c),
      ).toBe(undefined);
      await expect(
        s.port.settle?.("remote_desk", pending, { taskId: "elsewhere", state: "completed" }, c),
      ).rejects.toBeInstanceOf(ValidationError);
      expect(await stages(c.callId)).toEqual(["requested:1"]);
      // Done: the outcome, recorded for the attempt that was out, with its arguments' hash.
      expect(
        await s.port.settle?.("remote_desk", pending, { taskId: "remote-venue", state: "completed" }, c),
      ).toEqual({ content: "pushed: remote-venue completed" });
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);
      const hashes = (await s.audit.forTask(TASK))
        .filter((r) => r.callId === c.callId)
        .map((r) => r.argumentsHash);
      expect(new Set(hashes)).toEqual(new Set([pending.argumentsHash]));
    });

    it("settles a pending call whose push never came by asking the remote once; a caller that cannot settle later waits", async () => {
      const c = context();
      const out = await s.port.execute("remote_desk", { text: "hall" }, { ...c, handOff: async () => {} });
      const pending = out.pending as NonNullable<typeof out.pending>;
      expect(await s.port.settle?.("remote_desk", pending, undefined, c)).toEqual({
        content: "asked: remote-hall is done",
      });
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);

      const w = context();
      expect(await s.port.execute("remote_desk", { text: "room" }, w)).toEqual({
        content: "remote: room (waited)",
      });
      expect(await stages(w.callId)).toEqual(["requested:1", "completed:1"]);
    });

    it("joins a call that is still out instead of running it twice, and says it is running", async () => {
      const c = context();
      const first = s.port.execute("slow", {}, c);
      await until("the slow call to run", () => seen.runs.length === 1);
      expect(await s.port.history(TASK, c.callId)).toMatchObject({ running: true, attempts: 1 });
      const again = s.port.execute("slow", {}, c);
      seen.release();
      expect(await Promise.all([first, again])).toEqual([
        { content: "slow: done" },
        { content: "slow: done" },
      ]);
      expect(seen.runs).toHaveLength(1);
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);
      expect((await s.port.history(TASK, c.callId)).running).toBeUndefined();
    });
  });
}
