import { argumentsHash, type ToolFailureReason } from "../domain/events.ts";
import { deepFreeze } from "../domain/immutable.ts";
import { withMeta } from "../domain/resources.ts";
import { tenantOf, tenantUrn, type Urn } from "../domain/urn.ts";
import type { AuditLog, ToolCallRecord } from "../ports/audit-log.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import type { ToolBinding, ToolContext, ToolDescriptor, ToolPort, ToolResult } from "../ports/tools.ts";
import type { ResourceStore } from "../use-cases/resource-store.ts";
import type { a2aAgentBinding } from "./a2a-agent.ts";
import { type BuiltinDeps, builtinBinding } from "./builtins.ts";
import { parseToolsConfig, type ToolEntry } from "./config.ts";
import { httpEndpointBinding } from "./http-endpoint.ts";
import type { LambdaClientFor, LambdaFunctions } from "./lambda-function.ts";
import type { McpConnections, McpServer } from "./mcp.ts";

/**
 * The tool service (seeds/001's ListTools and ExecuteTool): the configured tools, each bound to
 * what implements it. Every call is checked, bounded and audited the same way whatever the tool:
 *   - the arguments are checked against the tool's schema before anything runs; invalid ones are
 *     an error the model can read, and the tool does not run;
 *   - a call runs under a timeout;
 *   - a result longer than `maxInlineChars` is stored as a resource under the task, and the model
 *     gets its URN and a preview (it reads on with `read_resource`);
 *   - the audit log records every call, completed or failed, with the actor, a hash of the
 *     arguments and the duration; a call that can change something outside (not `pure`) is
 *     recorded as requested before it runs, so a crash during it leaves a trace.
 */
export interface ToolServiceOptions {
  resources: ResourceStore;
  audit: AuditLog;
  /** Decides each call (tool.call); absent, every configured tool may be called. */
  policy?: PolicyEngine;
  clock: () => Date;
  /** Calls longer than this fail (per tool: `timeoutMs` in its configuration). Default 30 s. */
  defaultTimeoutMs?: number;
  /** Results longer than this are stored as resources and passed by URN. Default 16,000 characters. */
  maxInlineChars?: number;
  /**
   * The Lambda client of a region, for the lambda tools (tests point it at a local peer). Default:
   * the SDK's `new LambdaClient({ region })`, one per region, made only when a lambda tool exists.
   */
  lambda?: LambdaClientFor;
}

interface Entry {
  binding: ToolBinding;
  timeoutMs: number;
}

export class ToolService implements ToolPort {
  readonly #tools = new Map<string, Entry>();
  readonly #options: ToolServiceOptions;
  readonly #maxInline: number;
  /** What the tools hold open (MCP connections and servers, Lambda clients): closed by close(). */
  readonly #held: readonly Closable[];

  constructor(
    bindings: readonly (ToolBinding & { timeoutMs?: number })[],
    options: ToolServiceOptions,
    held: readonly Closable[] = [],
  ) {
    this.#options = options;
    this.#held = held;
    this.#maxInline = options.maxInlineChars ?? 16_000;
    for (const b of bindings) {
      deepFreeze(b.descriptor); // shared with every caller
      this.#tools.set(b.descriptor.name, {
        binding: b,
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
      ? new (await import("./mcp.ts")).McpConnections(options.fetch)
      : undefined;
    // So is the Lambda SDK.
    const lambda = Object.values(parsed.tools).some((e) => e.kind === "lambda")
      ? new (await import("./lambda-function.ts")).LambdaFunctions(options.lambda)
      : undefined;
    // And the A2A SDK; an A2A agent's card is fetched now, for its description.
    const a2a = Object.values(parsed.tools).some((e) => e.kind === "a2a")
      ? (await import("./a2a-agent.ts")).a2aAgentBinding
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
        bindings.push({ ...binding, ...(entry.timeoutMs ? { timeoutMs: entry.timeoutMs } : {}) });
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
    return [...this.#tools.values()].map((t) => t.binding.descriptor);
  }

  describe(names: readonly string[]): ToolDescriptor[] {
    const out: ToolDescriptor[] = [];
    for (const n of names) {
      const t = this.#tools.get(n);
      if (t) out.push(t.binding.descriptor);
    }
    return out;
  }

  check(name: string, args: Record<string, unknown>): string[] {
    return this.#tools.get(name)?.binding.check(args) ?? [];
  }

  /** Stores every tool's schema as a Tool resource of the tenant (what ListTools reads on AWS). */
  async register(tenant: string): Promise<Urn[]> {
    const urns: Urn[] = [];
    for (const { binding } of this.#tools.values()) {
      const d = binding.descriptor;
      const { urn } = await this.#options.resources.put({
        meta: withMeta({
          type: "common.Tool",
          name: d.name,
          parent: tenantUrn(tenant),
          purpose: d.description,
        }),
        function: { name: d.name, description: d.description, parameters: d.parameters },
        risky: d.risky,
        binding: { kind: d.kind, config: {} }, // settings may hold secrets: they stay in the configuration
      });
      urns.push(urn);
    }
    return urns;
  }

  async execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    const call = new CallRecord(name, args, context, this.#options);
    const tool = this.#tools.get(name);
    if (!tool)
      return call.failed(
        "unknown_tool",
        `Unknown tool "${name}". Use one of: ${[...this.#tools.keys()].join(", ")}`,
      );
    const problems = tool.binding.check(args);
    if (problems.length)
      return call.failed("invalid_arguments", `Invalid arguments for ${name}: ${problems.join("; ")}`);
    const denied = await this.#denied(tool.binding.descriptor, context);
    if (denied) return call.failed("denied", denied);
    // A call that can change something outside is on record ("requested") before it runs; a pure
    // one, or one that never starts, has only its outcome recorded (it changed nothing).
    const { pure, kind } = tool.binding.descriptor;
    if (!pure) await call.requested();

    // A pure built-in runs inside Arbor, on its arguments alone: no timer for it.
    const timeout = pure && kind === "builtin" ? undefined : AbortSignal.timeout(tool.timeoutMs);
    const signal =
      timeout && context.signal ? AbortSignal.any([context.signal, timeout]) : (timeout ?? context.signal);
    let content: string;
    try {
      const run = tool.binding.run(args, signal ? { ...context, signal } : context);
      content = await (signal ? raceAbort(run, signal) : run);
    } catch (e) {
      if (timeout?.aborted)
        return call.failed("timeout", `${name} did not finish within ${tool.timeoutMs} ms`);
      return call.failed("error", `${name} failed: ${(e as Error).message ?? String(e)}`);
    }

    if (content.length <= this.#maxInline) return call.completed(content);
    const { urn } = await this.#options.resources.put({
      meta: withMeta({
        type: "common.Message",
        name: `tool-result-${context.callId}`,
        parent: context.taskId,
      }),
      role: "tool",
      toolCallId: context.callId,
      content,
    });
    return call.completed(
      `The result is ${content.length} characters long, stored as ${urn}. Its start:\n` +
        `${content.slice(0, 2000)}\n[read the rest with read_resource, urn ${urn}, offset 2000]`,
      urn,
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

/** One call's audit records: its identity once, then "requested" (maybe) and its outcome. */
class CallRecord {
  readonly #base: Omit<ToolCallRecord, "at" | "stage">;
  readonly #options: ToolServiceOptions;
  readonly #started = performance.now();

  constructor(
    tool: string,
    args: Record<string, unknown>,
    context: ToolContext,
    options: ToolServiceOptions,
  ) {
    this.#options = options;
    this.#base = {
      taskId: context.taskId,
      callId: context.callId,
      tool,
      actor: context.actor,
      argumentsHash: argumentsHash(args),
    };
  }

  requested(): Promise<void> {
    return this.#write("requested", {});
  }

  async completed(content: string, resultUrn?: string): Promise<ToolResult> {
    await this.#write("completed", {
      durationMs: performance.now() - this.#started,
      ...(resultUrn ? { resultUrn } : {}),
    });
    return { content };
  }

  async failed(reason: ToolFailureReason, error: string): Promise<ToolResult> {
    await this.#write("failed", {
      durationMs: performance.now() - this.#started,
      reason,
      error: error.slice(0, 8000),
    });
    return { content: error, isError: true };
  }

  #write(stage: Stage, extra: Partial<ToolCallRecord>): Promise<void> {
    const { taskId } = this.#base;
    return this.#options.audit.record([
      {
        at: this.#options.clock().toISOString(),
        ...this.#base,
        taskId,
        stage,
        ...extra,
      },
    ]);
  }
}

type Stage = ToolCallRecord["stage"];

function mcpBinding(name: string, entry: Extract<ToolEntry, { kind: "mcp" }>, mcp: McpConnections) {
  const server: McpServer =
    entry.transport === "stdio"
      ? {
          transport: "stdio",
          command: entry.command as string,
          args: entry.args,
          ...(entry.env ? { env: entry.env } : {}),
          ...(entry.cwd ? { cwd: entry.cwd } : {}),
        }
      : { transport: "http", url: entry.url as string, headers: entry.headers };
  return mcp.binding(name, server, entry.tool ?? name, {
    ...(entry.description ? { description: entry.description } : {}),
    risky: entry.risky ?? false,
  });
}

interface Closable {
  close(): void | Promise<void>;
}

async function closeAll(held: readonly Closable[]): Promise<void> {
  await Promise.all(held.map((h) => h.close()));
}

/** A remote A2A agent: its card is fetched now (a card that cannot be is a ConfigError naming the tool). */
function a2aBinding(
  name: string,
  entry: Extract<ToolEntry, { kind: "a2a" }>,
  options: ToolServiceOptions & { fetch: typeof fetch },
  bind: typeof a2aAgentBinding,
) {
  return bind(
    name,
    {
      ...(entry.description ? { description: entry.description } : {}),
      risky: entry.risky ?? false,
      settings: { url: entry.url, headers: entry.headers },
      openTimeoutMs: entry.timeoutMs ?? options.defaultTimeoutMs ?? 30_000,
    },
    options.fetch,
  );
}

function bindingFor(
  name: string,
  entry: Exclude<ToolEntry, { kind: "mcp" | "a2a" }>,
  deps: BuiltinDeps,
  lambda: LambdaFunctions | undefined,
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
      return (lambda as LambdaFunctions).binding(name, {
        description: entry.description,
        parameters: entry.parameters,
        risky: entry.risky ?? false,
        settings: {
          function: entry.function,
          ...(entry.qualifier ? { qualifier: entry.qualifier } : {}),
          ...(entry.region ? { region: entry.region } : {}),
        },
      });
  }
}

/** A tool that ignores its signal still ends the call when the signal fires. */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
