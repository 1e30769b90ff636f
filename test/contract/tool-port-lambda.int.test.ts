import { afterEach, describe, expect, it } from "vitest";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { lambdaToolFunction } from "../../shared/adapters/aws/tool-function-invoke.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import type { ToolContext, ToolPort } from "../../shared/ports/tools.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { idempotencyKeyOf } from "../../shared/tools/service/call-record.ts";
import { ToolFunctionPort } from "../../shared/tools/service/tool-function-port.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { type LambdaHandler, LambdaInvokePeer, type LambdaPeerOptions } from "../peers/lambda-invoke.ts";
import { ASSISTANT, openToolWorld, TASK, type ToolWorld } from "../scenarios/tool-world.ts";
import {
  CONTRACT_PUBLIC_URL,
  contractBindings,
  type ToolRuns,
  toolPortContract,
} from "./tool-port.contract.ts";

/**
 * The Lambda-backed ToolPort of the engine's steps on AWS, through the real `@aws-sdk/client-lambda`
 * client and the local Invoke peer, to the real tool function handler (functions/tool.ts) running
 * the ToolService. The same contract as the in-process service; then what only this port meets:
 * the function failing, timing out, throttled, missing or forbidden, each a failed call on record.
 */
const FUNCTION = "arbor-test-tools";

interface Remote {
  world: ToolWorld;
  service: ToolService;
  handler: ToolHandler;
  peer: LambdaInvokePeer;
}

async function remote(
  bindings: ConstructorParameters<typeof ToolService>[0],
  handlers: (handler: ToolHandler) => Record<string, LambdaHandler> = (h) => ({ [FUNCTION]: h }),
  peerOptions: LambdaPeerOptions = {},
): Promise<Remote> {
  const world = await openToolWorld("arbor-tool-fn-");
  const service = new ToolService(bindings, world.options({ policy: defaultPolicy() }));
  const handler = createToolHandler({ service });
  const peer = await LambdaInvokePeer.start(handlers(handler), peerOptions);
  return { world, service, handler, peer };
}

async function closeRemote(r: Remote, port?: ToolPort): Promise<void> {
  await port?.close?.();
  await r.peer.close();
  await r.handler.close();
  await r.service.close();
  await r.world.close();
}

const openPort = (
  r: Remote,
  {
    functionName = FUNCTION,
    ...extra
  }: Partial<Parameters<typeof ToolFunctionPort.open>[0]> & {
    functionName?: string;
  } = {},
) =>
  ToolFunctionPort.open({
    toolFunction: lambdaToolFunction({
      client: r.peer.client(),
      ownsClient: true,
      functionName,
      throttleBackoffMs: [5, 5],
    }),
    audit: r.world.rt.audit,
    clock: () => new Date("2026-06-01T09:00:00.000Z"),
    ...extra,
  });

toolPortContract(
  "ToolFunctionPort -> tool function (real Lambda client, local Invoke peer)",
  async (bindings) => {
    const r = await remote(bindings);
    // The turn step's public URL: the port makes the callback an A2A agent that pushes is given.
    const port = await openPort(r, { publicUrl: CONTRACT_PUBLIC_URL });
    return {
      port,
      audit: r.world.rt.audit,
      resources: r.world.rt.resources,
      close: () => closeRemote(r, port),
    };
  },
);

describe("ToolFunctionPort: when the tool function cannot answer", () => {
  let r: Remote | undefined;
  let port: ToolPort | undefined;
  let seen: ToolRuns;
  let n = 0;
  const context = (): ToolContext => ({
    taskId: TASK,
    actor: ASSISTANT,
    callId: `fail_${++n}`,
    allowedTools: ["echo", "send_note", "boom", "huge", "slow"],
  });
  const stages = async (callId: string) =>
    (await r?.world.rt.audit.forTask(TASK))
      ?.filter((x) => x.callId === callId)
      .map((x) => `${x.stage}:${x.attempt ?? 1}${x.reason ? `:${x.reason}` : ""}`);

  afterEach(async () => {
    seen?.release();
    if (r) await closeRemote(r, port);
    r = undefined;
    port = undefined;
  });
  const start = async (
    handlers?: (handler: ToolHandler) => Record<string, LambdaHandler>,
    peerOptions?: LambdaPeerOptions,
  ) => {
    const made = contractBindings();
    seen = made.seen;
    r = await remote(made.bindings, handlers, peerOptions);
    return r;
  };

  it("sends ListTools once, at open, and each call as one RequestResponse Invoke with the call's context", async () => {
    const x = await start();
    port = await openPort(x);
    await port.execute("echo", { text: "hi" }, { ...context(), callId: "ctx_1" });
    expect(x.peer.invocations.map((i) => [i.name, i.invocationType])).toEqual([
      [FUNCTION, "RequestResponse"],
      [FUNCTION, "RequestResponse"],
    ]);
    expect(x.peer.invocations.map((i) => i.payload)).toEqual([
      { op: "ListTools" },
      {
        op: "ExecuteTool",
        tool: "echo",
        arguments: { text: "hi" },
        context: { taskId: TASK, actor: ASSISTANT, callId: "ctx_1", allowedTools: context().allowedTools },
      },
    ]);
    // The key is the tool service's, set in the function: the same one the port's history reports.
    expect(seen.runs[0]?.context.idempotencyKey).toBe(idempotencyKeyOf(TASK, "ctx_1"));
  });

  it("ListTools of a tenant is asked of the tool function each time; a bad namespace is refused before any Invoke; a registration is remembered for its TTL", async () => {
    const x = await start();
    let now = Date.parse("2026-06-01T09:00:00.000Z");
    port = await openPort(x, { clock: () => new Date(now), registerTtlMs: 60_000 });
    const list = port.listTools?.bind(port);
    const register = port.register?.bind(port);
    if (!list || !register) throw new Error("ToolFunctionPort lists and registers");
    expect((await list("acme", { namespace: "notes" })).map((d) => d.name)).toEqual(["echo", "send_note"]);
    expect((await list("acme")).map((d) => d.namespace)).toContain("desks");
    await expect(list("acme", { namespace: "../notes" })).rejects.toThrow(/a namespace is 1-64/);
    await register("acme");
    await register("acme"); // remembered: no second Invoke
    now += 60_000;
    await register("acme"); // its TTL passed: asked again (the function's record says nothing changed)
    expect(x.peer.invocations.slice(1).map((i) => i.payload)).toEqual([
      { op: "ListTools", tenant: "acme", namespace: "notes" },
      { op: "ListTools", tenant: "acme" },
      { op: "RegisterTools", tenant: "acme" },
      { op: "RegisterTools", tenant: "acme" },
    ]);
    // The function itself refuses what the port would not send, naming the rule.
    await expect(x.handler({ op: "ListTools", tenant: "acme", namespace: "*" })).rejects.toThrow(
      /a namespace is 1-64/,
    );
    await expect(x.handler({ op: "ListTools", tenant: "../acme" })).rejects.toThrow(ValidationError);
  });

  it("a registration that fails is remembered as long as one that succeeds: the tool function is not asked on every request", async () => {
    let failing = true;
    const x = await start((handler) => ({
      [FUNCTION]: (event) => {
        if (failing && (event as { op: string }).op === "RegisterTools")
          throw Object.assign(new Error("Could not reach DynamoDB"), { name: "UnavailableError" });
        return handler(event);
      },
    }));
    let now = Date.parse("2026-06-01T09:00:00.000Z");
    const p = await openPort(x, { clock: () => new Date(now), registerTtlMs: 60_000 });
    port = p;
    await expect(p.register("zeta")).rejects.toThrow(/Could not reach DynamoDB/);
    await expect(p.register("zeta")).rejects.toThrow(/Could not reach DynamoDB/);
    const registers = () =>
      x.peer.invocations.filter((i) => (i.payload as { op: string }).op === "RegisterTools").length;
    expect(registers()).toBe(1);
    // ListTools, asked each time, registers anyway.
    expect((await p.listTools("zeta")).length).toBe(7);
    failing = false;
    now += 60_000;
    expect((await p.register("zeta")).urns).toHaveLength(7);
    expect(registers()).toBe(2);
  });

  it("the list of tools is a cache: once refreshMs old, its next use reads ListTools again in the background; a failed refresh keeps the old list", async () => {
    // A redeploy of the tool function with another configuration: the peer's handler is swapped.
    const made = contractBindings();
    let current: ToolHandler | undefined;
    const x = await start(() => ({ [FUNCTION]: (event) => (current as ToolHandler)(event) }));
    current = x.handler;
    let now = Date.parse("2026-06-01T09:00:00.000Z");
    const p = await openPort(x, { clock: () => new Date(now), refreshMs: 60_000 });
    port = p;
    const names = () => p.list().map((d) => d.name);
    expect(names()).toContain("huge");
    const next = new ToolService(
      made.bindings.filter((b) => b.descriptor.name !== "huge"),
      x.world.options({ policy: defaultPolicy() }),
    );
    const redeployed = createToolHandler({ service: next });
    current = redeployed;
    now += 59_999;
    expect(names()).toContain("huge"); // not yet stale: no ListTools
    now += 1;
    expect(names()).toContain("huge"); // stale: the refresh starts, the old list answers meanwhile
    await p.refresh(); // joins the one under way
    expect(names()).not.toContain("huge");
    expect(p.describe(["huge"])).toEqual([]);
    const lists = x.peer.invocations.filter((i) => (i.payload as { op: string }).op === "ListTools");
    expect(lists).toHaveLength(2);
    // The function fails: the list stays, and is asked for again a period later.
    current = (() => Promise.reject(new Error("down"))) as unknown as ToolHandler;
    now += 60_000;
    await p.refresh();
    expect(names()).toEqual(["echo", "send_note", "boom", "slow", "remote_desk", "branch"]);
    await redeployed.close();
    await next.close();
  });

  it("opened in the background (the API function's): answers at once, lists the tools once ListTools answers, and asks again for a first list that failed", async () => {
    let current: ToolHandler | undefined;
    const x = await start(() => ({ [FUNCTION]: (event) => (current as ToolHandler)(event) }));
    // The function is down when the port opens: the port is there at once, with no tools.
    current = (() => Promise.reject(new Error("down"))) as unknown as ToolHandler;
    const p = ToolFunctionPort.openInBackground({
      toolFunction: lambdaToolFunction({ client: x.peer.client(), ownsClient: true, functionName: FUNCTION }),
      audit: x.world.rt.audit,
      clock: () => new Date("2026-06-01T09:00:00.000Z"),
    });
    port = p;
    expect(p.list()).toEqual([]);
    // Whoever needs the list waits for it; the first answer failed, so it is asked for again.
    await new Promise((r) => setTimeout(r, 50));
    current = x.handler;
    await p.ready();
    expect(p.list().map((d) => d.name)).toContain("echo");
    const lists = x.peer.invocations.filter((i) => (i.payload as { op: string }).op === "ListTools");
    expect(lists.length).toBeGreaterThanOrEqual(2);
  });

  it("a function error (the state table down in the function) is a failed call that did not start, on record", async () => {
    const x = await start((handler) => ({
      [FUNCTION]: (event) => {
        if ((event as { op: string }).op === "ExecuteTool")
          throw Object.assign(new Error("Could not reach DynamoDB"), { name: "UnavailableError" });
        return handler(event);
      },
    }));
    port = await openPort(x);
    const c = context();
    const result = await port.execute("send_note", { text: "hi" }, c);
    expect(result).toEqual({
      content:
        "send_note failed: the tool function failed (UnavailableError: Could not reach DynamoDB). It did not start.",
      isError: true,
    });
    expect(await stages(c.callId)).toEqual(["failed:1:error"]);
    // A risky call asked about again sees the failed attempt (engine/turn/approvals.ts asks again).
    expect(await port.history(TASK, c.callId)).toMatchObject({ attempts: 1, last: "failed" });
  });

  it("a call the function does not answer in time is a timeout whose outcome is unknown, on record as the attempt it started", async () => {
    const x = await start();
    port = await openPort(x, { invokeTimeoutMs: 1_000 });
    const c = context();
    const result = await port.execute("slow", {}, c);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /^slow failed: the tool function did not answer within 1000 ms\. It was started, so its outcome is unknown/,
    );
    expect(await stages(c.callId)).toEqual(["requested:1", "failed:1:timeout"]);
    expect(seen.runs).toHaveLength(1);
    // Asked again, the call is a second attempt with the same key (a risky one needs a new approval).
    expect(await port.history(TASK, c.callId)).toMatchObject({
      attempts: 1,
      last: "failed",
      idempotencyKey: idempotencyKeyOf(TASK, c.callId),
    });
  });

  it("Lambda's own timeout (Sandbox.Timedout) reads the same", async () => {
    const x = await start((handler) => ({
      [FUNCTION]: async (event) => {
        if ((event as { op: string }).op === "ListTools") return handler(event);
        // The service records the call as requested, then Lambda stops the function.
        void handler(event);
        await new Promise((res) => setTimeout(res, 200));
        throw Object.assign(new Error("Task timed out after 240.00 seconds"), { name: "Sandbox.Timedout" });
      },
    }));
    port = await openPort(x);
    const c = context();
    const result = await port.execute("slow", {}, c);
    expect(result.content).toMatch(/^slow failed: the tool function timed out .* outcome is unknown/);
    expect(await stages(c.callId)).toEqual(["requested:1", "failed:1:timeout"]);
  });

  it("a throttled Invoke is tried again (the function did not run); still throttled, a failed call that did not start", async () => {
    const throttled: Record<string, number> = { [FUNCTION]: 2 };
    const x = await start(undefined, { throttled });
    port = await openPort(x); // ListTools: throttled twice, then answered
    const c = context();
    expect(await port.execute("echo", { text: "once" }, c)).toEqual({ content: "echo: once" });
    throttled[FUNCTION] = 10; // more than the port's tries
    const d = context();
    const result = await port.execute("echo", { text: "twice" }, d);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /^echo failed: the tool function arbor-test-tools is throttled \(TooManyRequestsException: Rate Exceeded\.\); try again later.*It did not start\.$/,
    );
    expect(await stages(d.callId)).toEqual(["failed:1:error"]);
    expect(seen.runs.map((run) => run.args)).toEqual([{ text: "once" }]);
    expect(throttled[FUNCTION]).toBe(7); // three tries: the first and two more
  });

  it("a missing function, or one this role may not invoke: no port at all, or a failed call, saying what to fix", async () => {
    const denied: string[] = [];
    const x = await start((handler) => ({ [FUNCTION]: handler, "forbidden-tools": handler }), { denied });
    await expect(openPort(x, { functionName: "no-such-tools" })).rejects.toThrow(
      /tool function no-such-tools does not exist .*ARBOR_TOOL_FUNCTION.*ToolFunctionName/,
    );
    denied.push("forbidden-tools");
    await expect(openPort(x, { functionName: "forbidden-tools" })).rejects.toThrow(
      /may not invoke the tool function forbidden-tools .*ready and turn steps/,
    );
    port = await openPort(x);
    denied.push(FUNCTION); // the grant is gone (a deploy that moved it)
    const c = context();
    const result = await port.execute("echo", { text: "hi" }, c);
    expect(result.content).toMatch(
      /^echo failed: this function may not invoke the tool function arbor-test-tools \(AccessDeniedException: .*It did not start\.$/,
    );
    expect(await stages(c.callId)).toEqual(["failed:1:error"]);
    expect(seen.runs).toEqual([]);
  });

  it("a schema this side cannot compile checks nothing here; the tool function still checks the call", async () => {
    const odd = {
      descriptor: {
        name: "odd",
        kind: "http" as const,
        description: "A tool whose schema only its server understands",
        parameters: { type: "object", properties: { a: { type: "decimal" } } },
        risky: true,
        pure: false,
      },
      check: (args: Record<string, unknown>) => (typeof args.a === "number" ? [] : ["a: must be a decimal"]),
      run: async () => "odd: ok",
    };
    const world = await openToolWorld("arbor-tool-fn-");
    const service = new ToolService([odd], world.options({ policy: defaultPolicy() }));
    const handler = createToolHandler({ service });
    const peer = await LambdaInvokePeer.start({ [FUNCTION]: handler });
    r = { world, service, handler, peer };
    port = await openPort(r);
    expect(port.check("odd", { a: "x" })).toEqual([]);
    const c = { ...context(), allowedTools: ["odd"] };
    expect(await port.execute("odd", { a: "x" }, c)).toEqual({
      content: "Invalid arguments for odd: a: must be a decimal",
      isError: true,
    });
    expect(await port.execute("odd", { a: 1.5 }, { ...c, callId: `${c.callId}b` })).toEqual({
      content: "odd: ok",
    });
  });

  it("the handler refuses input that is not a request, naming the fields, and runs nothing", async () => {
    const x = await start();
    await expect(x.handler({ op: "ExecuteTool", tool: "echo" })).rejects.toThrow(ValidationError);
    await expect(x.handler({ op: "Nope" })).rejects.toThrow(/Invalid tool function input.*op/);
    expect(seen.runs).toEqual([]);
  });
});
