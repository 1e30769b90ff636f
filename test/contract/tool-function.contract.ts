import { afterEach, describe, expect, it } from "vitest";
import {
  ArborError,
  ConfigError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../shared/kernel/errors.ts";
import type { ToolFunctionClient } from "../../shared/ports/tool-function.ts";
import { until } from "../support/until.ts";
import type { ContractFunction, FunctionsBehind } from "./function-invoker.contract.ts";

/**
 * The one contract every ToolFunctionClient passes (shared/ports/tool-function.ts): one request to
 * the tool function, its JSON answer back within `timeoutMs`; a throttled request tried again (the
 * function did not run); anything else thrown, and `errorOf` saying what went wrong in the error
 * taxonomy, with `details.mayHaveRun` when the tool may have started.
 *
 * The setup is given the functions behind the client (as in the FunctionInvoker contract: by name,
 * what the service denies or throttles) and the name of the one the client is to reach, and returns
 * a client that owns its connection.
 */
export interface ToolFunctionFixture {
  client: ToolFunctionClient;
  /** Functions whose caller let go of the request before they answered (when there is a request). */
  abandoned?(): readonly string[];
  /** Connections the client holds open to the service (when it holds any). */
  connections?(): Promise<number>;
  close(): Promise<void>;
}

const TOOLS = "arbor-tools";

export function toolFunctionContract(
  name: string,
  setup: (behind: FunctionsBehind, functionName: string) => Promise<ToolFunctionFixture>,
): void {
  describe(`ToolFunctionClient contract: ${name}`, () => {
    let fx: ToolFunctionFixture | undefined;
    let release = () => {};
    afterEach(async () => {
      release();
      await fx?.close();
      fx = undefined;
    });
    /** The tool function, answering with `answer`; every request it ran in `ran`. */
    const start = async (
      answer: ContractFunction,
      extra: Omit<FunctionsBehind, "functions"> & { functionName?: string } = {},
    ) => {
      const ran: unknown[] = [];
      const { functionName = TOOLS, ...behind } = extra;
      const tool: ContractFunction = (event, context) => {
        ran.push(event);
        return answer(event, context);
      };
      fx = await setup({ functions: { [TOOLS]: tool }, ...behind }, functionName);
      return { ...fx, ran };
    };
    /** Waits for `release` (called after each test at the latest). */
    const held = () => new Promise((resolve) => (release = () => resolve({ late: true })));
    const failureOf = async (p: Promise<unknown>): Promise<unknown> => {
      try {
        await p;
      } catch (e) {
        return e;
      }
      throw new Error("expected the request to throw");
    };

    it("sends the request as the function's event; its JSON answer comes back; functionName names it", async () => {
      const x = await start((event) =>
        (event as { op: string }).op === "ListTools" ? { tools: [{ name: "echo", risky: false }] } : null,
      );
      expect(x.client.functionName).toBe(TOOLS);
      expect(await x.client.invoke({ op: "ListTools" })).toEqual({
        payload: { tools: [{ name: "echo", risky: false }] },
      });
      const request = { op: "ExecuteTool", tool: "echo", arguments: { text: "hé" } };
      expect(await x.client.invoke(request, 5_000)).toEqual({ payload: null });
      expect(x.ran).toEqual([{ op: "ListTools" }, request]);
    });

    it("a throttled request is tried again: answered, and the function ran once", async () => {
      const x = await start(() => ({ ok: true }), { throttled: { [TOOLS]: 2 } });
      expect(await x.client.invoke({ op: "ListTools" })).toEqual({ payload: { ok: true } });
      expect(x.ran).toEqual([{ op: "ListTools" }]);
    });

    it("throttled past its tries: it throws, errorOf says THROTTLED naming the function, and the function never ran", async () => {
      const x = await start(() => ({ ok: true }), { throttled: { [TOOLS]: 1_000 } });
      const error = x.client.errorOf(await failureOf(x.client.invoke({ op: "ListTools" })));
      expect(error).toBeInstanceOf(ThrottledError);
      expect(error.code).toBe("THROTTLED");
      expect(error.message).toContain(TOOLS);
      expect(error.details.mayHaveRun).toBeUndefined();
      expect(x.ran).toEqual([]);
    });

    it("a function that throws: errorOf says UNAVAILABLE, may have run, with its errorType; one that refuses the request, VALIDATION", async () => {
      const x = await start((event) => {
        const { op } = event as { op: string };
        if (op === "Nope")
          throw Object.assign(new Error("Invalid tool function input: op"), { name: "ValidationError" });
        throw Object.assign(new Error("Could not reach DynamoDB"), { name: "UnavailableError" });
      });
      const failed = x.client.errorOf(await failureOf(x.client.invoke({ op: "ExecuteTool" })));
      expect(failed).toBeInstanceOf(UnavailableError);
      expect(failed.message).toContain("Could not reach DynamoDB");
      expect(failed.details).toMatchObject({ mayHaveRun: true, errorType: "UnavailableError" });
      const refused = x.client.errorOf(await failureOf(x.client.invoke({ op: "Nope" })));
      expect(refused).toBeInstanceOf(ValidationError);
      expect(refused.message).toContain("Invalid tool function input: op");
    });

    it("the function stopped at its own timeout (Sandbox.Timedout): UNAVAILABLE, timed out, may have run", async () => {
      const x = await start(() => {
        throw Object.assign(new Error("Task timed out after 240.00 seconds"), { name: "Sandbox.Timedout" });
      });
      const error = x.client.errorOf(await failureOf(x.client.invoke({ op: "ExecuteTool" })));
      expect(error).toBeInstanceOf(UnavailableError);
      expect(error.details).toMatchObject({ mayHaveRun: true, timedOut: true });
    });

    it("no answer within timeoutMs: it throws by then, lets go of the request, and errorOf says it timed out and may have run", async () => {
      const x = await start(held);
      const started = Date.now();
      const thrown = await failureOf(x.client.invoke({ op: "ExecuteTool" }, 300));
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(Date.now() - started).toBeLessThan(1_300);
      const error = x.client.errorOf(thrown);
      expect(error).toBeInstanceOf(UnavailableError);
      expect(error.message).toContain("300 ms");
      expect(error.details).toMatchObject({ mayHaveRun: true, timedOut: true });
      expect(x.ran).toHaveLength(1);
      if (x.abandoned) await until("the request let go", () => x.abandoned?.().includes(TOOLS), 2_000);
    });

    it("throttled, then slow: the request still ends within timeoutMs (the waits between tries count)", async () => {
      const x = await start(() => new Promise((resolve) => setTimeout(() => resolve({ late: true }), 350)), {
        throttled: { [TOOLS]: 2 },
      });
      const started = Date.now();
      const outcome = await x.client.invoke({ op: "ExecuteTool" }, 400).then(
        () => undefined,
        (e: unknown) => x.client.errorOf(e),
      );
      expect(Date.now() - started).toBeLessThan(400 + 150);
      // Answered in time, or timed out (it may have started) or still throttled (it did not).
      if (outcome?.code === "THROTTLED") expect(x.ran).toEqual([]);
      else if (outcome) expect(outcome.details).toMatchObject({ mayHaveRun: true, timedOut: true });
    });

    it("the caller's signal stops the wait; errorOf says it may have run", async () => {
      const x = await start(held);
      const controller = new AbortController();
      const request = x.client.invoke({ op: "ExecuteTool" }, 10_000, controller.signal);
      await until("the function runs", () => x.ran.length === 1);
      const started = Date.now();
      controller.abort();
      const error = x.client.errorOf(await failureOf(request));
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(error.details.mayHaveRun).toBe(true);
    });

    it("a missing function, or one the caller may not invoke: errorOf says CONFIG, naming the function; it never ran", async () => {
      const missing = await start(() => ({ ok: true }), { functionName: "no-such-tools" });
      const notFound = missing.client.errorOf(await failureOf(missing.client.invoke({ op: "ListTools" })));
      expect(notFound).toBeInstanceOf(ConfigError);
      expect(notFound.code).toBe("CONFIG");
      expect(notFound.message).toContain("no-such-tools");
      await fx?.close();
      const denied = await start(() => ({ ok: true }), { denied: [TOOLS] });
      const forbidden = denied.client.errorOf(await failureOf(denied.client.invoke({ op: "ListTools" })));
      expect(forbidden).toBeInstanceOf(ConfigError);
      expect(forbidden.message).toContain(TOOLS);
      expect(denied.ran).toEqual([]);
    });

    it("errorOf: an error it does not know may have run (a connection lost after the request went); one of the taxonomy comes back as it is", async () => {
      const { client } = await start(() => null);
      const reset = client.errorOf(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
      expect(reset).toBeInstanceOf(UnavailableError);
      expect(reset.details.mayHaveRun).toBe(true);
      expect(client.errorOf("not even an Error")).toBeInstanceOf(ArborError);
      for (const known of [
        new ThrottledError("slow down"),
        new ConfigError("set it"),
        new ValidationError("no"),
        new UnavailableError("down", { details: { mayHaveRun: false } }),
      ])
        expect(client.errorOf(known)).toBe(known);
    });

    it("close() lets go of its connection", async () => {
      const x = await start(() => ({ ok: true }));
      await x.client.invoke({ op: "ListTools" });
      if (x.connections) expect(await x.connections()).toBeGreaterThan(0);
      x.client.close();
      if (x.connections)
        await until("no connection left", async () => (await x.connections?.()) === 0, 2_000);
    });
  });
}
