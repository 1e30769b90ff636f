import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AuditLog } from "../../shared/ports/audit-log.ts";
import type { ToolBinding, ToolContext, ToolPort } from "../../shared/ports/tools.ts";
import { idempotencyKeyOf } from "../../shared/tools/call-record.ts";
import { jsonSchemaChecker } from "../../shared/tools/json-schema.ts";
import type { ResourceStore } from "../../shared/use-cases/resource-store.ts";
import { ASSISTANT, TASK } from "../e2e/tool-world.ts";

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

/** What the bindings saw: every run, with the context the tool got. */
export interface ToolRuns {
  runs: { tool: string; args: Record<string, unknown>; context: ToolContext }[];
  /** `slow` waits for this to be called. */
  release: () => void;
}

const HUGE = 100_000;

/** The tools every port is set up with. */
export function contractBindings(): { bindings: ToolBinding[]; seen: ToolRuns } {
  let release = () => {};
  const seen: ToolRuns = { runs: [], release: () => release() };
  const tool = (
    name: string,
    parameters: Record<string, unknown>,
    run: (args: Record<string, unknown>) => Promise<string> | string,
    extra: { risky?: boolean } = {},
  ): ToolBinding => ({
    descriptor: {
      name,
      kind: "http",
      description: `The contract's ${name}`,
      parameters,
      risky: extra.risky ?? false,
      pure: false,
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
  const bindings = [
    tool("echo", text, (args) => `echo: ${String(args.text)}`),
    tool("send_note", text, (args) => `sent: ${String(args.text)}`, { risky: true }),
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
    const ALL = ["echo", "send_note", "boom", "huge", "slow"];
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

    it("executes a call: the result, and the call on record as requested then completed", async () => {
      const c = context();
      expect(await s.port.execute("echo", { text: "hello" }, c)).toEqual({ content: "echo: hello" });
      expect(await stages(c.callId)).toEqual(["requested:1", "completed:1"]);
      expect(seen.runs.map((r) => r.tool)).toEqual(["echo"]);
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

    it("joins a call that is still out instead of running it twice, and says it is running", async () => {
      const c = context();
      const first = s.port.execute("slow", {}, c);
      await until(() => seen.runs.length === 1);
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

/** Polls (a generous deadline: the machine may be busy) until `done` holds. */
async function until(done: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}
