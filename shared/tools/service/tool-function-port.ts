import type { ToolFailureReason } from "../../domain/events.ts";
import { deepFreeze } from "../../domain/immutable.ts";
import { type ArborError, UnavailableError, ValidationError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import { currentTraceparent } from "../../kernel/tracing.ts";
import type { AuditLog } from "../../ports/audit-log.ts";
import type { ToolFunctionClient } from "../../ports/tool-function.ts";
import type {
  CallHistory,
  GivenCallback,
  PendingCall,
  ToolContext,
  ToolDescriptor,
  ToolPort,
  ToolRegistration,
  ToolResult,
} from "../../ports/tools.ts";
import { newCallback } from "../bindings/a2a-push-client.ts";
import {
  ExecuteToolResponseSchema,
  ListToolsResponseSchema,
  RegisterToolsResponseSchema,
  SettleToolResponseSchema,
  type ToolFunctionRequest,
} from "../bindings/tool-function-protocol.ts";
import { CallRecord, historyOf } from "./call-record.ts";
import { jsonSchemaChecker } from "./json-schema.ts";
import { checkNamespace } from "./tool-registry.ts";

/**
 * The tool port of the engine's steps on AWS: every call goes to the tool function
 * (functions/tool.ts), which runs the same ToolService as `arbor serve` does in process, with its
 * policy check, idempotency key, audit records, bounded results and outbound guard, and which alone
 * holds the tools' grants, registry and connections. This side holds none of them.
 *
 * - ListTools is invoked when the port is opened (the step's cold start): `list`, `describe`
 *   and `check` answer from that list, without a call (never a listing per model turn). The list
 *   is a cache: once it is `refreshMs` old (5 minutes), the next use asks ListTools again in the
 *   background and goes on with the old list until the answer comes, so a tool function deployed
 *   with another configuration is known to warm steps within minutes (a failed refresh keeps the
 *   old list and tries again a period later). `check` validates against the tool's JSON Schema
 *   (what the model is shown); the function checks again, with the tool's own checker.
 * - `listTools(tenant, { namespace })` is ListTools of seeds/001, asked of the tool function each
 *   time: it reads the tenant's stored Tool resources (registering them first if need be), where
 *   the configuration is. A namespace that is not one is refused here, before any Invoke.
 * - `register(tenant)` asks the tool function to register the tenant's Tool resources (the
 *   engine's first request of a tenant, see engine/team.ts), bounded by 20 s: remembered per
 *   tenant, failed or not, for `registerTtlMs` (5 minutes), then asked again, so a tool function deployed with another
 *   configuration registers it within that time of the tenant's next request (the tool function
 *   itself registers each tenant again on its first ListTools after a deploy).
 * - ExecuteTool is a synchronous Invoke (RequestResponse), bounded by `invokeTimeoutMs`: the tool
 *   function's own timeout (TOOL_FUNCTION_TIMEOUT_MS) plus a margin. Each tool call is bounded below
 *   that by the tool service (a tool's timeoutMs, at most TOOL_CALL_MAX_MS on a deployed stack), so
 *   the function records the outcome before Lambda could stop it.
 * - A call the function could not answer (it threw, it timed out, it was throttled, Invoke failed)
 *   is mapped to the error taxonomy (ThrottledError, UnavailableError, ConfigError, ...) and ends as
 *   a failed call, recorded here in the audit log as the attempt the function started (or the next
 *   one, when it never started), never as an exception. A call whose outcome is unknown (the
 *   function was cut off after it recorded the call as requested) is said to be so, so the model and,
 *   for risky calls, the person asked again (engine/turn/approvals.ts) know it may have taken effect.
 * - `history` reads the same audit log the function writes (the state table), plus the calls out
 *   now from this process, which a second execute of the same call joins instead of repeating.
 * - No retries of an Invoke that reached the function: a retry after a lost answer could run an
 *   effect twice. A throttled Invoke (the function did not run) is retried a few times.
 * - An A2A agent that offers push (with `publicUrl`, for a caller with handOff: the turn step):
 *   the callback is made and recorded here and sent with the call; the function's answer is then
 *   `pending` and the turn ends. `settle` (SettleTool) settles it in the function, with the push
 *   the API function received or, at the deadline, by asking the agent once.
 */

const REGISTER_TTL_MS = 5 * 60_000;
const REFRESH_MS = 5 * 60_000;
/** The longest a registration may take before the request that asked for it goes on without it. */
const REGISTER_TIMEOUT_MS = 20_000;
/** Tenants whose registration is remembered, at most this many (then asked again). */
const MAX_REGISTERED = 10_000;

export interface ToolFunctionPortOptions {
  /** The tool function (adapters/aws/tool-function-invoke.ts: Lambda's Invoke); closed with the port. */
  toolFunction: ToolFunctionClient;
  /** The audit log the tool function writes (the state table): histories, and failures recorded here. */
  audit: AuditLog;
  clock: () => Date;
  /** Default TOOL_FUNCTION_TIMEOUT_MS plus 10 s. */
  invokeTimeoutMs?: number;
  /** How old the list of tools may get before its next use asks ListTools again (default 5 minutes). */
  refreshMs?: number;
  /** How long a tenant's registration is remembered before `register` asks again (default 5 minutes). */
  registerTtlMs?: number;
  /**
   * Where callers reach this Arbor (ARBOR_PUBLIC_URL of the turn step): with it, an `a2a` call of a
   * caller that can settle it later (ToolContext.handOff) gets a callback made and recorded here,
   * which the tool function gives an agent that offers push. Absent: every call waits.
   */
  publicUrl?: string;
}

const log = componentLogger("tool-port");

interface Entry {
  descriptor: ToolDescriptor;
  check: (args: Record<string, unknown>) => string[];
}

export class ToolFunctionPort implements ToolPort {
  readonly #options: ToolFunctionPortOptions;
  #tools = new Map<string, Entry>();
  /** When the list was read (the clock's ms), and the refresh under way, if one is. */
  #listedAt: number;
  #refreshing: Promise<void> | undefined;
  readonly #running = new Map<string, Promise<ToolResult>>();
  /** Each tenant's registration, with when it was asked for (see `register`). */
  readonly #registered = new Map<string, { at: number; registration: Promise<ToolRegistration> }>();
  #closed = false;

  private constructor(options: ToolFunctionPortOptions, descriptors: readonly ToolDescriptor[]) {
    this.#options = options;
    this.#tools = entries(descriptors);
    this.#listedAt = options.clock().getTime();
  }

  /** Asks the tool function for its tools (ListTools); a function that cannot answer throws. */
  static async open(options: ToolFunctionPortOptions): Promise<ToolFunctionPort> {
    return new ToolFunctionPort(options, await configuredTools(options));
  }

  /**
   * A port that asks for the tools in the background: it answers at once, with no tools until
   * ListTools answers; `ready()` waits for that answer (and asks again when it failed). The API
   * function's: its cold start waits on no other function, and its list decides only an admin's
   * team (awaited then).
   */
  static openInBackground(options: ToolFunctionPortOptions): ToolFunctionPort {
    const port = new ToolFunctionPort(options, []);
    port.#first = port.#readFirst();
    port.#first.catch(() => {});
    return port;
  }

  #first: Promise<void> | undefined;

  async #readFirst(): Promise<void> {
    this.#tools = entries(await configuredTools(this.#options));
    this.#listedAt = this.#options.clock().getTime();
  }

  ready(): Promise<void> {
    if (!this.#first) return Promise.resolve();
    // A first listing that failed is asked for again by whoever needs it.
    this.#first = this.#first.catch(() => this.#readFirst());
    return this.#first;
  }

  list(): ToolDescriptor[] {
    this.#keepFresh();
    return [...this.#tools.values()].map((t) => t.descriptor);
  }

  describe(names: readonly string[]): ToolDescriptor[] {
    this.#keepFresh();
    return names.flatMap((n) => {
      const t = this.#tools.get(n);
      return t ? [t.descriptor] : [];
    });
  }

  check(name: string, args: Record<string, unknown>): string[] {
    this.#keepFresh();
    return this.#tools.get(name)?.check(args) ?? [];
  }

  /**
   * Reads the tool function's tools again (ListTools), joining a refresh under way; the list the
   * port answers from is replaced once the answer comes. A failure keeps the old list.
   */
  refresh(): Promise<void> {
    this.#refreshing ??= configuredTools(this.#options)
      .then((descriptors) => {
        this.#tools = entries(descriptors);
      })
      .catch((error: unknown) => {
        log.warn("could not refresh the list of tools; the old one stays", {
          error: error instanceof Error ? error.message : String(error),
        });
      })
      .finally(() => {
        this.#listedAt = this.#options.clock().getTime();
        this.#refreshing = undefined;
      });
    return this.#refreshing;
  }

  /** Starts a refresh in the background when the list is `refreshMs` old. */
  #keepFresh(): void {
    if (this.#closed || this.#refreshing) return;
    const age = this.#options.clock().getTime() - this.#listedAt;
    if (age >= (this.#options.refreshMs ?? REFRESH_MS)) void this.refresh();
  }

  async listTools(tenant: string, options: { namespace?: string } = {}): Promise<ToolDescriptor[]> {
    const namespace = checkNamespace(options.namespace);
    const request: ToolFunctionRequest = {
      op: "ListTools",
      tenant,
      ...(namespace !== undefined ? { namespace } : {}),
    };
    const parsed = ListToolsResponseSchema.safeParse(await this.#ask(request));
    if (!parsed.success)
      throw new UnavailableError(
        "the tool function answered ListTools with something else than { tools: [...] }: deploy the engine stack's functions from one commit",
      );
    return parsed.data.tools.map((d) => deepFreeze(d));
  }

  register(tenant: string): Promise<ToolRegistration> {
    const now = this.#options.clock().getTime();
    const known = this.#registered.get(tenant);
    if (known && now - known.at < (this.#options.registerTtlMs ?? REGISTER_TTL_MS)) return known.registration;
    if (this.#registered.size >= MAX_REGISTERED) this.#registered.clear();
    // Bounded well below a call's wait: a request of the tenant waits for it (engine/team.ts).
    const timeout = Math.min(this.#options.invokeTimeoutMs ?? REGISTER_TIMEOUT_MS, REGISTER_TIMEOUT_MS);
    const registration = this.#ask({ op: "RegisterTools", tenant }, timeout).then((payload) => {
      const parsed = RegisterToolsResponseSchema.safeParse(payload);
      if (!parsed.success)
        throw new UnavailableError(
          "the tool function answered RegisterTools with something else than { registration }: deploy the engine stack's functions from one commit",
        );
      return parsed.data.registration;
    });
    // A failure is remembered as long as a success: a tool function that is down or slow is not
    // asked again on every request of the tenant (ListTools, asked each time, registers anyway).
    this.#registered.set(tenant, { at: now, registration });
    registration.catch(() => {});
    return registration;
  }

  /** One request the tool function answers with data (no call is recorded): its errors thrown. */
  async #ask(request: ToolFunctionRequest, timeoutMs = this.#options.invokeTimeoutMs): Promise<unknown> {
    try {
      return (await this.#options.toolFunction.invoke(request, timeoutMs)).payload;
    } catch (e) {
      throw this.#options.toolFunction.errorOf(e);
    }
  }

  async execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    const key = `${context.taskId}\u0000${context.callId}`;
    const running = this.#running.get(key);
    if (running) return running;
    const call = this.#call(name, args, context);
    this.#running.set(key, call);
    try {
      return await call;
    } finally {
      this.#running.delete(key);
    }
  }

  async history(taskId: string, callId: string): Promise<CallHistory> {
    const history = historyOf(await this.#options.audit.forTask(taskId), taskId, callId);
    return this.#running.has(`${taskId}\u0000${callId}`) ? { ...history, running: true } : history;
  }

  /**
   * Lets go of the client. A call still out is not recorded as failed: the process is going away
   * as in a crash, and its record (requested, and whatever the tool function writes) tells the
   * next step what happened.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#options.toolFunction.close();
  }

  async #call(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    // The caller's turn is written meanwhile (ToolContext.after): the call goes out once it is on record.
    const [before] = await Promise.all([this.history(context.taskId, context.callId), context.after]);
    const request: ToolFunctionRequest = {
      op: "ExecuteTool",
      tool: name,
      arguments: args,
      context: { ...wireContext(context), ...(await this.#callback(name, context)) },
    };
    try {
      const { payload } = await this.#options.toolFunction.invoke(
        request,
        this.#options.invokeTimeoutMs,
        context.signal,
      );
      const parsed = ExecuteToolResponseSchema.safeParse(payload);
      if (!parsed.success)
        throw new UnavailableError(
          `the tool function answered ExecuteTool with something else than { result: { content } }`,
          { details: { mayHaveRun: true } },
        );
      const { content, isError, pending } = parsed.data.result;
      return { content, ...(isError ? { isError } : {}), ...(pending ? { pending } : {}) };
    } catch (e) {
      const error = this.#options.toolFunction.errorOf(e);
      if (this.#closed) throw error;
      log.warn("tool call failed in the tool function", {
        tool: name,
        urn: context.taskId,
        callId: context.callId,
        code: error.code,
        error: error.message,
      });
      return this.#failed(name, args, context, before, error);
    }
  }

  /**
   * The callback an A2A agent that offers push may be given: made here (the tool function has no
   * public URL) and put on record through the caller's handOff before the call goes out, as the
   * binding does in process (tools/bindings/a2a-agent.ts). Only for `a2a` tools of a caller that can settle
   * the call later; a callback the agent is never given (it does not push, or it answered at once)
   * is a record nothing points to, which expires.
   */
  async #callback(name: string, context: ToolContext): Promise<{ callback?: GivenCallback }> {
    const { publicUrl } = this.#options;
    if (!publicUrl || !context.handOff || this.#tools.get(name)?.descriptor.kind !== "a2a") return {};
    const { callbackId, token, tokenHash, config } = newCallback(publicUrl);
    await context.handOff({ callbackId, tokenHash });
    return { callback: { callbackId, token, url: config.url } };
  }

  /**
   * Settles a call a remote agent was handed (ToolPort.settle), in the tool function, which holds
   * the tool and records the outcome (SettleTool). A push about another task is a ValidationError;
   * a tool function that cannot be reached throws (the push is answered 5xx and sent again; the
   * turn step that asks at the deadline fails and is re-driven).
   */
  async settle(
    name: string,
    pending: PendingCall,
    pushed: unknown,
    context: ToolContext,
  ): Promise<ToolResult | undefined> {
    const request: ToolFunctionRequest = {
      op: "SettleTool",
      tool: name,
      pending,
      ...(pushed !== undefined ? { pushed } : {}),
      context: wireContext(context),
    };
    let payload: unknown;
    try {
      ({ payload } = await this.#options.toolFunction.invoke(
        request,
        this.#options.invokeTimeoutMs,
        context.signal,
      ));
    } catch (e) {
      throw this.#options.toolFunction.errorOf(e);
    }
    const parsed = SettleToolResponseSchema.safeParse(payload);
    if (!parsed.success)
      throw new UnavailableError(
        "the tool function answered SettleTool with something else than { result }, { running } or { invalid }: " +
          "deploy the engine stack's functions from one commit",
      );
    const answer = parsed.data;
    if ("invalid" in answer) throw new ValidationError(answer.invalid);
    if ("running" in answer) return undefined;
    const { content, isError } = answer.result;
    return isError ? { content, isError } : { content };
  }

  /**
   * A call the tool function did not answer, as a failed call on record: the attempt it started
   * (recorded as requested, with no outcome), or, when it started none, the next one. When the
   * function did record an outcome (its answer was lost on the way back), that stays the record.
   */
  async #failed(
    name: string,
    args: Record<string, unknown>,
    context: ToolContext,
    before: CallHistory,
    error: ArborError,
  ): Promise<ToolResult> {
    const after = historyOf(
      await this.#options.audit.forTask(context.taskId),
      context.taskId,
      context.callId,
    );
    const started = after.attempts > before.attempts;
    if (started && after.last !== "unknown") {
      return {
        content: `${name} ran (attempt ${after.attempts} ${after.last}), but its answer was lost on the way back (${error.message}); do not assume either way what it did.`,
        isError: true,
      };
    }
    const attempt = started ? after.attempts : before.attempts + 1;
    const record = new CallRecord(name, args, context, attempt, this.#options);
    const reason: ToolFailureReason = error.details.timedOut === true ? "timeout" : "error";
    // A call with effects is on record as requested before it runs: none, and it did not start.
    const outcome = started
      ? " It was started, so its outcome is unknown: it may or may not have taken effect."
      : " It did not start.";
    return record.failed(reason, `${name} failed: ${error.message}.${outcome}`);
  }
}

/** The tool function's configured tools (ListTools without a tenant); one that cannot answer throws. */
async function configuredTools(options: ToolFunctionPortOptions): Promise<ToolDescriptor[]> {
  let payload: unknown;
  try {
    ({ payload } = await options.toolFunction.invoke({ op: "ListTools" }, options.invokeTimeoutMs));
  } catch (e) {
    throw options.toolFunction.errorOf(e);
  }
  const parsed = ListToolsResponseSchema.safeParse(payload);
  if (!parsed.success)
    throw new ValidationError(
      `The tool function ${options.toolFunction.functionName} answered ListTools with something else than { tools: [...] }: deploy the engine stack's functions from one commit`,
      parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
    );
  return parsed.data.tools;
}

/** Descriptors by name, frozen, each with its checker (compiled when first needed). */
function entries(descriptors: readonly ToolDescriptor[]): Map<string, Entry> {
  const map = new Map<string, Entry>();
  for (const d of descriptors) {
    deepFreeze(d);
    map.set(d.name, { descriptor: d, check: lazyChecker(d) });
  }
  return map;
}

/** The ToolContext fields that cross the wire (tool-function-protocol.ts). */
const wireContext = (context: ToolContext) => ({
  taskId: context.taskId,
  actor: context.actor,
  callId: context.callId,
  ...(context.allowedTools ? { allowedTools: [...context.allowedTools] } : {}),
  ...(context.activity ? { activity: context.activity } : {}),
  // The call's span (execute_tool) is the tool function's: a child of the step's, in the request's trace.
  ...traceOf(currentTraceparent()),
});

const traceOf = (traceparent: string | undefined) => (traceparent ? { traceparent } : {});

/**
 * Compiles a tool's checker when it is first needed (most steps check no arguments). A schema this
 * side cannot compile checks nothing here: the tool function checks every call with the tool's own.
 */
function lazyChecker(d: ToolDescriptor): (args: Record<string, unknown>) => string[] {
  let check: ((args: Record<string, unknown>) => string[]) | undefined;
  return (args) => {
    if (!check) {
      try {
        check = jsonSchemaChecker(d.parameters, `tools.${d.name}`);
      } catch (error) {
        log.warn("a tool's schema does not compile here; the tool function checks its arguments", {
          tool: d.name,
          error: error instanceof Error ? error.message : String(error),
        });
        check = () => [];
      }
    }
    return check(args);
  };
}
