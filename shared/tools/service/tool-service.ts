import { argumentsHash } from "../../domain/events.ts";
import { deepFreeze } from "../../domain/immutable.ts";
import { withMeta } from "../../domain/resources.ts";
import { wholeCharacters } from "../../domain/text.ts";
import { tenantOf } from "../../domain/urn.ts";
import { ConfigError, ValidationError } from "../../kernel/errors.ts";
import { ATTR, contentCaptured, inSpan, type SpanHandle } from "../../kernel/tracing.ts";
import type { AuditLog } from "../../ports/audit-log.ts";
import type { FunctionInvoker } from "../../ports/function-invoker.ts";
import type { PolicyEngine } from "../../ports/policy.ts";
import type { StateStore } from "../../ports/state-store.ts";
import {
  type CallHistory,
  isHandedOff,
  type PendingCall,
  type ToolBinding,
  type ToolContext,
  type ToolDescriptor,
  type ToolPort,
  type ToolRegistration,
  type ToolResult,
} from "../../ports/tools.ts";
import type { ResourceStore } from "../../store/resource-store.ts";
import type { a2aAgentBinding } from "../bindings/a2a-agent.ts";
import { httpEndpointBinding } from "../bindings/http-endpoint.ts";
import { lambdaBinding } from "../bindings/lambda-function.ts";
import type { McpConnections } from "../bindings/mcp.ts";
import { a2aBinding, mcpBinding } from "../bindings/server-bindings.ts";
import { type BuiltinDeps, builtinBinding } from "./builtins.ts";
import { CallRecord, describeValue, historyOf, raceAbort, resultText, thrownMessage } from "./call-record.ts";
import { namespaceOf, parseToolsConfig, type ToolEntry } from "./config.ts";
import { checkNamespace, registerTools, storedTools } from "./tool-registry.ts";

/** The most of a result that is kept: a Message's content holds 1,000,000 characters at most. */
export const MAX_STORED_RESULT_CHARS = 1_000_000;

/**
 * The tool service (seeds/001's ListTools and ExecuteTool): the configured tools, each bound to
 * what implements it. Every call is checked, bounded and audited the same way whatever the tool:
 *   - the arguments are checked against the tool's schema before anything runs; invalid ones are
 *     an error the model can read, and the tool does not run;
 *   - a call runs under a timeout;
 *   - a result longer than `maxInlineChars` is stored as a resource under the task, and the model
 *     gets its URN and a preview (it reads on with `read_resource`); a result of any size, or of
 *     any kind, ends as a completed or a failed call, never as an exception;
 *   - the audit log records every attempt of every call, completed or failed, with the actor, a
 *     hash of the arguments, the attempt number and the duration; a call that can change something
 *     outside (not `pure`) is recorded as requested, on disk, before it runs, so a crash during it
 *     leaves a trace (and `history` shows it, for the engine to ask before running it again);
 *   - each attempt of a call gets the call's idempotency key (the same for every attempt, see
 *     call-record.ts), which the bindings pass on to the tool.
 */

export interface ToolServiceOptions {
  resources: ResourceStore;
  /**
   * Where each tenant's tool registration is recorded (tools/service/tool-registry.ts), so that racing
   * registrations end with one set. Absent: each registration compares the stored resources only.
   */
  state?: StateStore;
  audit: AuditLog;
  /** Decides each call (tool.call); absent, every configured tool may be called. */
  policy?: PolicyEngine;
  clock: () => Date;
  /** Calls longer than this fail (per tool: `timeoutMs` in its configuration). Default 30 s. */
  defaultTimeoutMs?: number;
  /**
   * Results longer than this are stored as resources and passed by URN. Default 16,000 characters;
   * at most MAX_STORED_RESULT_CHARS.
   */
  maxInlineChars?: number;
  /**
   * Resolves once everything written so far is on disk (Runtime.untilDurable): a call with effects
   * runs only once its "requested" record is, so a crash during it cannot hide that it started.
   */
  untilDurable?: () => Promise<void>;
  /**
   * Invokes the functions of the lambda tools (the composition roots give Lambda's Invoke:
   * adapters/aws/lambda-invoker.ts), made only when a lambda tool exists.
   */
  functions?: () => FunctionInvoker | Promise<FunctionInvoker>;
  /**
   * Where callers reach this Arbor from outside (ARBOR_PUBLIC_URL, `arbor serve --public-url`):
   * an A2A agent that offers push answers a long task there instead of holding the call. Absent:
   * every call waits for its answer, unless its caller gives a callback (ToolContext.callback: the
   * tool function on AWS).
   */
  publicUrl?: string | (() => string | undefined);
}

interface Entry {
  binding: ToolBinding;
  /** The binding's descriptor with its namespace (what list and describe give). */
  descriptor: ToolDescriptor;
  timeoutMs: number;
}

/** Tenants registered by this process, remembered at most this many (then registered again: a no-op). */
const MAX_REGISTERED = 10_000;

export class ToolService implements ToolPort {
  readonly #tools = new Map<string, Entry>();
  readonly #options: ToolServiceOptions;
  readonly #maxInline: number;
  /** The calls running now, by task and call id, each with its outcome to come. */
  readonly #running = new Map<string, Promise<ToolResult>>();
  /** What the tools hold open (MCP connections and servers, Lambda clients): closed by close(). */
  readonly #held: readonly Closable[];
  /**
   * Each tenant's registration by this process (tools/service/tool-registry.ts), in flight or done. The
   * configuration of a process never changes, so a tenant registered once stays registered for it;
   * a changed configuration is a new process (a restart, a new Lambda instance), which registers
   * each tenant again on its first need. A failed registration is forgotten (tried again).
   */
  readonly #registered = new Map<string, Promise<ToolRegistration>>();

  constructor(
    bindings: readonly (ToolBinding & { timeoutMs?: number; namespace?: string })[],
    options: ToolServiceOptions,
    held: readonly Closable[] = [],
  ) {
    this.#options = options;
    this.#held = held;
    this.#maxInline = Math.min(options.maxInlineChars ?? 16_000, MAX_STORED_RESULT_CHARS);
    for (const b of bindings) {
      deepFreeze(b.descriptor); // shared with every caller
      const namespace = checkNamespace(b.namespace ?? b.descriptor.namespace) ?? b.descriptor.kind;
      this.#tools.set(b.descriptor.name, {
        binding: b,
        descriptor: deepFreeze({ ...b.descriptor, namespace }),
        timeoutMs: b.timeoutMs ?? options.defaultTimeoutMs ?? 30_000,
      });
    }
  }

  /**
   * The tools of a configuration (parsed here: a bad one throws, naming the field). MCP servers are
   * connected now, so that their tools' schemas are known; `close()` disconnects them. A2A agents'
   * cards are fetched now too, for their descriptions (a card that cannot be fetched throws).
   */
  static async open(
    config: unknown,
    options: ToolServiceOptions & Omit<BuiltinDeps, "resources">,
    source?: string,
  ): Promise<ToolService> {
    const parsed = parseToolsConfig(config, source);
    const deps: BuiltinDeps = { ...options, resources: options.resources };
    // The MCP SDK is loaded only when a tool needs it (it is a tenth of a W1 run's heap).
    const mcp = Object.values(parsed.tools).some((e) => e.kind === "mcp")
      ? new (await import("../bindings/mcp.ts")).McpConnections(options.fetch)
      : undefined;
    // So are the functions' clients.
    const lambda = Object.values(parsed.tools).some((e) => e.kind === "lambda")
      ? await functionsOf(options, source)
      : undefined;
    // And the A2A SDK; an A2A agent's card is fetched now, for its description.
    const a2a = Object.values(parsed.tools).some((e) => e.kind === "a2a")
      ? (await import("../bindings/a2a-agent.ts")).a2aAgentBinding
      : undefined;
    const held = [mcp, lambda].filter((h): h is NonNullable<typeof h> => h !== undefined);
    try {
      const bindings = [];
      for (const [name, entry] of Object.entries(parsed.tools)) {
        const binding =
          entry.kind === "mcp"
            ? await mcpBinding(name, entry, mcp as McpConnections)
            : entry.kind === "a2a"
              ? await a2aBinding(name, entry, options, a2a as typeof a2aAgentBinding)
              : bindingFor(name, entry, deps, lambda);
        bindings.push({
          ...binding,
          namespace: namespaceOf(entry),
          ...(entry.timeoutMs ? { timeoutMs: entry.timeoutMs } : {}),
        });
      }
      return new ToolService(bindings, options, held);
    } catch (e) {
      await closeAll(held);
      throw e;
    }
  }

  /** Disconnects from the MCP servers (and stops those Arbor started), and lets go of the Lambda clients. */
  async close(): Promise<void> {
    await closeAll(this.#held);
  }

  list(): ToolDescriptor[] {
    return [...this.#tools.values()].map((t) => t.descriptor);
  }

  describe(names: readonly string[]): ToolDescriptor[] {
    const out: ToolDescriptor[] = [];
    for (const n of names) {
      const t = this.#tools.get(n);
      if (t) out.push(t.descriptor);
    }
    return out;
  }

  check(name: string, args: Record<string, unknown>): string[] {
    return this.#tools.get(name)?.binding.check(args) ?? [];
  }

  /**
   * Makes the tenant's Tool resources this configuration's (tools/service/tool-registry.ts), once per
   * tenant per process; registrations of one tenant at once in this process share one.
   */
  register(tenant: string): Promise<ToolRegistration> {
    const known = this.#registered.get(tenant);
    if (known) return known;
    if (this.#registered.size >= MAX_REGISTERED) this.#registered.clear();
    const registration = registerTools(this.#options, tenant, this.list());
    this.#registered.set(tenant, registration);
    registration.catch(() => this.#registered.delete(tenant));
    return registration;
  }

  /** ListTools: the tenant's stored Tool resources (registered first if need be), of a namespace or all. */
  async listTools(tenant: string, options: { namespace?: string } = {}): Promise<ToolDescriptor[]> {
    const namespace = checkNamespace(options.namespace); // refused before anything is written
    await this.register(tenant);
    return storedTools(this.#options.resources, tenant, namespace);
  }

  async execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    // A call already running here (its step was driven again while it is out) is joined, not repeated.
    const key = runningKey(context.taskId, context.callId);
    const running = this.#running.get(key);
    if (running) return running;
    const attempt = inSpan(
      `execute_tool ${name}`,
      {
        attributes: {
          [ATTR.operation]: "execute_tool",
          [ATTR.toolName]: name,
          [ATTR.toolCallId]: context.callId,
          [ATTR.taskUrn]: context.taskId,
          ...(contentCaptured() ? { [ATTR.toolArguments]: JSON.stringify(args).slice(0, 16_384) } : {}),
        },
      },
      async (span) => {
        const result = await this.#attempt(name, args, context, span);
        span.set(ATTR.toolOutcome, result.pending ? "pending" : result.isError ? "error" : "ok");
        if (contentCaptured()) span.set(ATTR.toolResult, result.content.slice(0, 16_384));
        return result;
      },
    );
    this.#running.set(key, attempt);
    try {
      return await attempt;
    } finally {
      this.#running.delete(key);
    }
  }

  async #attempt(
    name: string,
    args: Record<string, unknown>,
    context: ToolContext,
    span: SpanHandle,
  ): Promise<ToolResult> {
    // A new attempt, numbered after those on record (a re-driven step runs a call again); what the
    // caller must have on record first (its turn) is written meanwhile.
    const [{ attempts, idempotencyKey }] = await Promise.all([
      this.history(context.taskId, context.callId),
      context.after,
    ]);
    const attempt = attempts + 1;
    const call = new CallRecord(name, args, context, attempt, this.#options);
    const tool = this.#tools.get(name);
    if (!tool)
      return call.failed(
        "unknown_tool",
        `Unknown tool "${name}". Use one of: ${[...this.#tools.keys()].join(", ")}`,
      );
    span.set(ATTR.toolType, tool.descriptor.kind === "builtin" ? "function" : "extension");
    const problems = tool.binding.check(args);
    if (problems.length) {
      span.fail("invalid_arguments");
      return call.failed("invalid_arguments", `Invalid arguments for ${name}: ${problems.join("; ")}`);
    }
    const denied = await this.#denied(tool.descriptor, context);
    span.set(ATTR.policyDecision, denied ? "deny" : "allow");
    if (denied) {
      span.fail("denied");
      return call.failed("denied", denied);
    }
    // A call that can change something outside is on record ("requested"), on disk, before it
    // runs; a pure one, or one that never starts, has only its outcome recorded (it changed nothing).
    const { pure, kind } = tool.descriptor;
    if (!pure) {
      await call.requested();
      await this.#options.untilDurable?.();
    }

    // A pure built-in runs inside Arbor, on its arguments alone: no timer for it.
    const timeout = pure && kind === "builtin" ? undefined : AbortSignal.timeout(tool.timeoutMs);
    const signal =
      timeout && context.signal ? AbortSignal.any([context.signal, timeout]) : (timeout ?? context.signal);
    const runContext: ToolContext = { ...context, idempotencyKey, attempt, ...(signal ? { signal } : {}) };
    // From here on every way the call can go ends as a recorded outcome, never as a throw: a throw
    // would leave the call "requested" for ever and the step would run it again on every re-drive.
    let value: unknown;
    try {
      const run = tool.binding.run(args, runContext);
      value = await (signal ? raceAbort(run, signal) : run);
    } catch (e) {
      if (timeout?.aborted) {
        span.fail("timeout");
        return call.failed("timeout", `${name} did not finish within ${tool.timeoutMs} ms`);
      }
      span.fail("error");
      return call.failed("error", `${name} failed: ${thrownMessage(e)}`);
    }
    // Handed off to a remote agent that will push its answer: no outcome yet (the audit keeps the
    // attempt "requested"); the engine keeps the pending call and settles it later (settle).
    if (isHandedOff(value)) {
      const { callbackId, tokenHash, remoteTaskId } = value;
      const deadline = new Date(this.#options.clock().getTime() + tool.timeoutMs).toISOString();
      const pending = {
        callbackId,
        tokenHash,
        remoteTaskId,
        deadline,
        attempt,
        argumentsHash: argumentsHash(args),
      };
      return { content: `${name}: the remote agent is working on task ${remoteTaskId}`, pending };
    }
    return this.#outcome(name, call, value, context);
  }

  /**
   * Settles a call a remote agent was handed (ToolPort.settle): from its push, or, with none, by
   * asking it once (still running then: the call timed out). The outcome is recorded for the
   * attempt that was out; a push that says it still runs records nothing (undefined). A push that
   * is not about the call's task throws (ValidationError), recording nothing.
   */
  async settle(
    name: string,
    pending: PendingCall,
    pushed: unknown,
    context: ToolContext,
  ): Promise<ToolResult | undefined> {
    const tool = this.#tools.get(name);
    const call = new CallRecord(name, {}, context, pending.attempt, {
      ...this.#options,
      argumentsHash: pending.argumentsHash,
    });
    if (!tool?.binding.settle)
      return call.failed("unknown_tool", `Tool "${name}" cannot take a remote answer`);
    let value: string | undefined;
    try {
      value = await tool.binding.settle(pending.remoteTaskId, pushed, AbortSignal.timeout(tool.timeoutMs));
    } catch (e) {
      if (e instanceof ValidationError) throw e;
      return call.failed("error", `${name} failed: ${thrownMessage(e)}`);
    }
    if (value !== undefined) return this.#outcome(name, call, value, context);
    if (pushed !== undefined) return undefined;
    return call.failed("timeout", `${name} did not finish within ${tool.timeoutMs} ms`);
  }

  /** A run's value as the call's recorded outcome: text inline, or stored when it is long. */
  #outcome(name: string, call: CallRecord, value: unknown, context: ToolContext): Promise<ToolResult> {
    const content = resultText(value);
    if (content === undefined)
      return call.failed(
        "error",
        `${name} returned no text (${describeValue(value)}): it gave the model nothing`,
      );
    if (content.length <= this.#maxInline) return call.completed(content);
    return this.#storeResult(name, call, content, context);
  }

  /** What the audit log says of a call's attempts so far (ToolPort.history). */
  async history(taskId: string, callId: string): Promise<CallHistory> {
    const history = historyOf(await this.#options.audit.forTask(taskId), taskId, callId);
    return this.#running.has(runningKey(taskId, callId)) ? { ...history, running: true } : history;
  }

  /**
   * A result too long to pass inline: stored as a resource under the task (its first
   * MAX_STORED_RESULT_CHARS characters, the most a Message holds), and the model gets the URN and
   * the start. A result that cannot be stored is a failed call: the tool ran, but nobody can read
   * what it returned.
   */
  async #storeResult(name: string, call: CallRecord, content: string, context: ToolContext) {
    const cut = content.length > MAX_STORED_RESULT_CHARS;
    const kept = wholeCharacters(content, MAX_STORED_RESULT_CHARS);
    const head = wholeCharacters(content, 2000);
    let urn: string;
    try {
      ({ urn } = await this.#options.resources.put({
        meta: withMeta({
          type: "common.Message",
          name: `tool-result-${context.callId}`,
          parent: context.taskId,
        }),
        role: "tool",
        toolCallId: context.callId,
        content: cut ? content.slice(0, kept) : content,
      }));
    } catch (e) {
      return call.failed(
        "error",
        `${name} ran, but its result (${content.length} characters) could not be stored: ${thrownMessage(e)}`,
      );
    }
    const stored = cut
      ? `The result is ${content.length} characters long, more than the ${MAX_STORED_RESULT_CHARS} a result may keep: its first ${kept} are stored as ${urn} and the rest was dropped.`
      : `The result is ${content.length} characters long, stored as ${urn}.`;
    return call.completed(
      `${stored} Its start:\n${content.slice(0, head)}\n[read the rest with read_resource, urn ${urn}, offset ${head}]`,
      { resultUrn: urn, resultChars: content.length },
    );
  }

  /** Why policy refuses the call, or undefined when it allows it. */
  async #denied(tool: ToolDescriptor, context: ToolContext): Promise<string | undefined> {
    const policy = this.#options.policy;
    if (!policy) return undefined;
    const actorTenant = tenantOf(context.actor);
    try {
      const decision = await policy.decide({
        principal: { id: context.actor, kind: "agent", ...(actorTenant ? { tenant: actorTenant } : {}) },
        action: "tool.call",
        resource: {
          id: `tool:${tool.name}`,
          tenant: tenantOf(context.taskId) ?? "(none)",
          type: "tool",
          tool: tool.name,
          risky: tool.risky,
        },
        context: { allowedTools: [...(context.allowedTools ?? [])] },
      });
      return decision.allow
        ? undefined
        : `Policy does not allow ${context.actor} to call ${tool.name} (decision ${decision.id}): do without it`;
    } catch (e) {
      return `Policy could not decide whether ${tool.name} may be called (${(e as Error).message}), so it may not`;
    }
  }
}

const runningKey = (taskId: string, callId: string) => `${taskId}\u0000${callId}`;

interface Closable {
  close(): void | Promise<void>;
}

async function closeAll(held: readonly Closable[]): Promise<void> {
  await Promise.all(held.map((h) => h.close()));
}

function bindingFor(
  name: string,
  entry: Exclude<ToolEntry, { kind: "mcp" | "a2a" }>,
  deps: BuiltinDeps,
  lambda: FunctionInvoker | undefined,
): ToolBinding {
  switch (entry.kind) {
    case "builtin":
      return builtinBinding(
        name,
        entry.function,
        {
          ...(entry.description ? { description: entry.description } : {}),
          ...(entry.risky !== undefined ? { risky: entry.risky } : {}),
          settings: entry.allowedHosts ? { allowedHosts: entry.allowedHosts } : {},
        },
        deps,
      );
    case "http":
      return httpEndpointBinding(
        name,
        {
          description: entry.description,
          parameters: entry.parameters,
          risky: entry.risky ?? false,
          settings: { url: entry.url, method: entry.method, headers: entry.headers },
        },
        deps.fetch,
      );
    case "lambda":
      return lambdaBinding(
        name,
        {
          description: entry.description,
          parameters: entry.parameters,
          risky: entry.risky ?? false,
          settings: {
            function: entry.function,
            ...(entry.qualifier ? { qualifier: entry.qualifier } : {}),
            ...(entry.region ? { region: entry.region } : {}),
          },
        },
        lambda as FunctionInvoker,
      );
  }
}

/** The lambda tools' invoker the composition root gives; a runtime that gives none cannot run them. */
async function functionsOf(
  options: ToolServiceOptions,
  source: string | undefined,
): Promise<FunctionInvoker> {
  if (!options.functions)
    throw new ConfigError(
      `${source ?? "The tools configuration"} has lambda tools, and this runtime invokes no functions: run it with Arbor's runtimes (arbor serve, the deployed stack)`,
    );
  return options.functions();
}
