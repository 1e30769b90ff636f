import { afterEach, describe, expect, it } from "vitest";
import type { FunctionInvocation, FunctionInvoker } from "../../shared/ports/function-invoker.ts";
import { until } from "../support/until.ts";

/**
 * The one contract every FunctionInvoker passes (shared/ports/function-invoker.ts): one synchronous
 * invocation of a cloud function, the event in, the result back as text; a function that throws
 * answers with `functionError`; an invocation that fails throws with the service's error name.
 *
 * The setup is given the functions behind the invoker (by name, as Lambda handlers) and what the
 * service does with some of them (deny, throttle), and returns an invoker that reaches them.
 */

/** What a function is given besides its event (the names of the Node.js runtime's context). */
export interface FunctionContext {
  /** The ARN invoked: its region, and the version or alias it was invoked with. */
  invokedFunctionArn: string;
  /** The invocation's client context, decoded. */
  clientContext?: unknown;
}

export type ContractFunction = (event: unknown, context: FunctionContext) => unknown;

/** The functions behind an invoker, and what the service does with them. */
export interface FunctionsBehind {
  functions: Record<string, ContractFunction>;
  /** Functions the caller may not invoke (AccessDeniedException); they never run. */
  denied?: string[];
  /** Functions whose next n invocations are throttled (TooManyRequestsException); they do not run. */
  throttled?: Record<string, number>;
}

export interface FunctionInvokerFixture {
  invoker: FunctionInvoker;
  /** The region an invocation without one reaches. */
  defaultRegion: string;
  /** Functions whose caller let go of the request before they answered (when there is a request). */
  abandoned?(): readonly string[];
  /** Connections the invoker holds open to the service (when it holds any). */
  connections?(): Promise<number>;
  close(): Promise<void>;
}

export function functionInvokerContract(
  name: string,
  setup: (behind: FunctionsBehind) => Promise<FunctionInvokerFixture>,
): void {
  describe(`FunctionInvoker contract: ${name}`, () => {
    let fx: FunctionInvokerFixture | undefined;
    let release = () => {};
    afterEach(async () => {
      release();
      await fx?.close();
      fx = undefined;
    });
    const start = async (behind: FunctionsBehind) => {
      fx = await setup(behind);
      return fx;
    };
    /** A function that answers with its event and what it was told of the invocation. */
    const echo: ContractFunction = (event, context) => ({ event, ...context });
    const call = (invoker: FunctionInvoker, request: Partial<FunctionInvocation> = {}) =>
      invoker.invoke({ functionName: "echo", region: "eu-west-1", payload: "{}", ...request });
    const failureOf = async (p: Promise<unknown>): Promise<Error> => {
      try {
        await p;
      } catch (e) {
        expect(e).toBeInstanceOf(Error);
        return e as Error;
      }
      throw new Error("expected the invocation to throw");
    };

    it("the event reaches the function as sent; its result comes back as the text of its JSON", async () => {
      const { invoker } = await start({
        functions: {
          echo,
          word: () => "late",
          nothing: () => undefined,
        },
      });
      const event = { city: "Lisbon", people: 12, tags: ["é", "ü"], nested: { ok: true } };
      const answer = await call(invoker, { payload: JSON.stringify(event) });
      expect(answer.functionError).toBeUndefined();
      expect(typeof answer.payload).toBe("string");
      expect(JSON.parse(answer.payload)).toMatchObject({ event });
      expect(await call(invoker, { functionName: "word" })).toEqual({ payload: '"late"' });
      expect(await call(invoker, { functionName: "nothing" })).toEqual({ payload: "null" });
    });

    it("reaches the version or alias named by `qualifier` or `name:qualifier`, in the region asked", async () => {
      const { invoker } = await start({ functions: { echo } });
      const arnOf = async (request: Partial<FunctionInvocation>) =>
        (JSON.parse((await call(invoker, request)).payload) as FunctionContext).invokedFunctionArn;
      expect(await arnOf({ qualifier: "live" })).toMatch(
        /^arn:aws:lambda:eu-west-1:\d{12}:function:echo:live$/,
      );
      expect(await arnOf({ functionName: "echo:7", region: "eu-central-1" })).toMatch(
        /^arn:aws:lambda:eu-central-1:\d{12}:function:echo:7$/,
      );
      const arn = "arn:aws:lambda:ap-southeast-2:123456789012:function:echo:prod";
      expect(await arnOf({ functionName: arn, region: "ap-southeast-2" })).toBe(arn);
      expect(await arnOf({})).toMatch(/^arn:aws:lambda:eu-west-1:\d{12}:function:echo$/);
    });

    it("an invocation without a region reaches the default one", async () => {
      const x = await start({ functions: { echo } });
      const { payload } = await call(x.invoker, { region: undefined });
      expect((JSON.parse(payload) as FunctionContext).invokedFunctionArn).toContain(`:${x.defaultRegion}:`);
    });

    it("a function that throws answers with functionError and the runtime's error JSON", async () => {
      const { invoker } = await start({
        functions: {
          "check-city": (event) => {
            throw new TypeError(`${(event as { city: string }).city} is not in Europe`);
          },
        },
      });
      const answer = await call(invoker, { functionName: "check-city", payload: '{"city":"Lima"}' });
      expect(answer.functionError).toEqual(expect.any(String));
      expect(answer.functionError).not.toBe("");
      expect(JSON.parse(answer.payload)).toMatchObject({
        errorType: "TypeError",
        errorMessage: "Lima is not in Europe",
      });
    });

    it("an invocation that fails throws with the service's error name: missing, forbidden, throttled; none ran", async () => {
      const ran: string[] = [];
      const counted =
        (name: string): ContractFunction =>
        () => {
          ran.push(name);
          return "ran";
        };
      const { invoker } = await start({
        functions: { payroll: counted("payroll"), busy: counted("busy") },
        denied: ["payroll"],
        throttled: { busy: 1 },
      });
      const missing = await failureOf(call(invoker, { functionName: "no-such-function" }));
      expect(missing.name).toBe("ResourceNotFoundException");
      expect(missing.message).toContain("no-such-function");
      const forbidden = await failureOf(call(invoker, { functionName: "payroll" }));
      expect(forbidden.name).toBe("AccessDeniedException");
      // Throttled once: the invocation throws, it is not tried again behind the caller's back (a
      // function with effects could run twice); the caller decides.
      const throttled = await failureOf(call(invoker, { functionName: "busy" }));
      expect(throttled.name).toBe("TooManyRequestsException");
      expect(ran).toEqual([]);
      expect(await call(invoker, { functionName: "busy" })).toEqual({ payload: '"ran"' });
      expect(ran).toEqual(["busy"]);
    });

    it("the client context reaches the function as context.clientContext; none, none", async () => {
      const { invoker } = await start({ functions: { echo } });
      const custom = { idempotencyKey: "arbor-key-1", attempt: 2 };
      const clientContext = Buffer.from(JSON.stringify({ custom })).toString("base64");
      const withIt = JSON.parse((await call(invoker, { clientContext })).payload) as FunctionContext;
      expect(withIt.clientContext).toEqual({ custom });
      const without = JSON.parse((await call(invoker)).payload) as FunctionContext;
      expect(without.clientContext).toBeUndefined();
    });

    it("an aborted signal stops the wait while the function runs, and lets go of the request", async () => {
      let running = false;
      const x = await start({
        functions: {
          slow: () =>
            new Promise((resolve) => {
              running = true;
              release = () => resolve("late");
            }),
        },
      });
      const controller = new AbortController();
      const invocation = call(x.invoker, { functionName: "slow", signal: controller.signal });
      await until("the function runs", () => running);
      const started = Date.now();
      controller.abort();
      await failureOf(invocation);
      expect(Date.now() - started).toBeLessThan(1_000);
      if (x.abandoned) await until("the request let go", () => x.abandoned?.().includes("slow"), 2_000);
    });

    it("a signal already aborted: it throws and the function never runs", async () => {
      let ran = 0;
      const { invoker } = await start({ functions: { counted: () => ++ran } });
      await failureOf(call(invoker, { functionName: "counted", signal: AbortSignal.abort() }));
      expect(ran).toBe(0);
    });

    it("close() lets go of its connections, in every region it reached", async () => {
      const x = await start({ functions: { echo } });
      await call(x.invoker, { region: "eu-west-1" });
      await call(x.invoker, { region: "us-east-2" });
      if (x.connections) expect(await x.connections()).toBeGreaterThan(0);
      x.invoker.close();
      if (x.connections)
        await until("no connection left", async () => (await x.connections?.()) === 0, 2_000);
    });
  });
}
