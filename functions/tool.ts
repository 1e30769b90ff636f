import { formatIssues } from "../shared/domain/resources.ts";
import { ConfigError, ValidationError } from "../shared/kernel/errors.ts";
import { componentLogger } from "../shared/kernel/logger.ts";
import { withTraceparent } from "../shared/kernel/tracing.ts";
import type { InvocationMetrics } from "../shared/ports/metrics.ts";
import type { ToolContext, ToolPort, ToolResult } from "../shared/ports/tools.ts";
import { type AwsClients, type AwsRuntime, createAwsRuntime } from "../shared/runtime/aws/aws.ts";
import { type AwsToolsOptions, openAwsToolService } from "../shared/runtime/aws/aws-tools.ts";
import { lambdaMetrics, withMeteredAudit } from "../shared/runtime/aws/lambda-parts.ts";
import type { Config } from "../shared/runtime/config.ts";
import {
  type ExecuteToolResponse,
  type ListToolsResponse,
  type RegisterToolsResponse,
  type SettleToolResponse,
  type ToolFunctionRequest,
  ToolFunctionRequestSchema,
} from "../shared/tools/bindings/tool-function-protocol.ts";
import { awsConfigOf, memoisedStart, traced } from "./cold-start.ts";

/**
 * The tool function: the policy-checked proxy for every tool call of the engine on AWS (seeds/001's
 * ListTools and ExecuteTool). It runs the same ToolService as `arbor serve` runs in process, with
 * the registry bundled with it, and it alone holds what the tools need: the invoke grants of the
 * registry's lambda tools, their settings and headers, the MCP and A2A connections (opened at its
 * cold start), the outbound guard. The ready and turn steps call it synchronously through
 * ToolFunctionPort (shared/tools/service/tool-function-port.ts).
 *
 * An A2A agent that offers push is given the callback the turn step made and recorded (the
 * request's `context.callback`): the call comes back `pending` and the turn ends. SettleTool
 * settles such a call later, with the push the API function received or, at its deadline, by
 * asking the agent once (GetTask), and records its outcome in the audit log, here, where the tool is.
 *
 * A tool's own failures (invalid arguments, unknown tool, policy deny, a throw, a timeout, a huge
 * result) are results, recorded in the audit log, never thrown. The handler throws only for input
 * that is not a request (ValidationError) or when the service cannot start or record (the state
 * table is down): Lambda reports that as a function error, which the caller records as a failed call.
 */
export interface ToolFunctionDeps {
  /** Default: `loadConfig()`, the environment the engine stack sets. */
  config?: () => Config;
  clients?: AwsClients;
  tools?: AwsToolsOptions;
  /** A tool service already open (tests): used instead of the one built from the configuration. */
  service?: ToolPort;
  /** Counts the tool calls that ended, per invocation (default: CloudWatch EMF, namespace Arbor). */
  metrics?: InvocationMetrics;
}

/** The part of Lambda's context object the tool function reads. */
export interface ToolLambdaContext {
  awsRequestId?: string;
  getRemainingTimeInMillis?: () => number;
}

export type ToolHandler = ((
  input: unknown,
  context?: ToolLambdaContext,
) => Promise<ListToolsResponse | RegisterToolsResponse | ExecuteToolResponse | SettleToolResponse>) & {
  close(): Promise<void>;
};

/** Time kept back from Lambda's deadline so a call still out is recorded as failed before it. */
const DEADLINE_MARGIN_MS = 5_000;

const log = componentLogger("tool-function");

export function createToolHandler(deps: ToolFunctionDeps = {}): ToolHandler {
  const metrics = deps.metrics ?? lambdaMetrics();
  const instance = deps.service ? given(deps.service) : coldStart(deps, metrics);
  const stage = () => {
    const config = deps.config?.() ?? undefined;
    return (config?.mode === "aws" ? config.stage : undefined) ?? process.env.ARBOR_STAGE ?? "unknown";
  };
  const handle = async (input: unknown, lambda?: ToolLambdaContext) => {
    try {
      const result = await traced(() => execute(input, lambda));
      // What it wrote announced before it returns (a frozen instance sends nothing).
      await instance.settled();
      return result;
    } finally {
      // The calls' ends, counted where their audit records are written (ToolCalls, ToolCallsFailed).
      metrics.flush({ stage: stage(), route: "tool" });
    }
  };
  const execute = async (input: unknown, lambda?: ToolLambdaContext) => {
    const parsed = ToolFunctionRequestSchema.safeParse(input);
    if (!parsed.success) {
      throw new ValidationError(
        'Invalid tool function input: expected { "op": "ListTools", "tenant", "namespace" }, ' +
          '{ "op": "RegisterTools", "tenant" }, { "op": "ExecuteTool", "tool", ' +
          '"arguments", "context": { "taskId", "actor", "callId", "allowedTools" } } or { "op": "SettleTool", ' +
          '"tool", "pending", "pushed", "context" }, as ToolFunctionPort sends them',
        formatIssues(parsed.error),
      );
    }
    const request = parsed.data;
    const service = await instance.get();
    if (request.op === "ListTools") {
      if (request.tenant === undefined) return { tools: service.list() };
      // ListTools of a tenant: its stored Tool resources, read here where the configuration is.
      return { tools: await tenantTools(service).listTools(request.tenant, namespaceOption(request)) };
    }
    if (request.op === "RegisterTools")
      return { registration: await tenantTools(service).register(request.tenant) };
    const started = Date.now();
    const remaining = lambda?.getRemainingTimeInMillis?.();
    const { callback, traceparent, ...given } = request.context;
    const context: ToolContext = {
      taskId: given.taskId,
      actor: given.actor,
      callId: given.callId,
      ...(given.allowedTools ? { allowedTools: given.allowedTools } : {}),
      // An activity's call and scoped messages (shared/engine/turn/activities.ts): its handler gets them.
      ...(given.activity ? { activity: given.activity } : {}),
      // Made and recorded by the turn step (ToolFunctionPort): an A2A agent that pushes gets it.
      ...(callback && request.op === "ExecuteTool" ? { callback } : {}),
      ...(remaining !== undefined
        ? { signal: AbortSignal.timeout(Math.max(1, remaining - DEADLINE_MARGIN_MS)) }
        : {}),
    };
    const done = (result: ToolResult, what: string) => {
      log.info(what, {
        tool: request.tool,
        urn: given.taskId,
        callId: given.callId,
        isError: result.isError === true,
        ...(result.pending ? { remoteTaskId: result.pending.remoteTaskId } : {}),
        durationMs: Date.now() - started,
        ...(lambda?.awsRequestId ? { requestId: lambda.awsRequestId } : {}),
      });
      return { result: wire(result) };
    };
    // In the caller's trace: the call's execute_tool span is a child of the turn step's.
    return withTraceparent(traceparent, async () => {
      if (request.op === "SettleTool") return settle(service, request, context, done);
      return done(await service.execute(request.tool, request.arguments, context), "tool call done");
    });
  };
  return Object.assign(handle, { close: instance.close });
}

/** The tool service's ListTools and register, which a tool function's service must have. */
function tenantTools(service: ToolPort): Required<Pick<ToolPort, "listTools" | "register">> {
  const { listTools, register } = service;
  if (!listTools || !register)
    throw new ConfigError(
      "This tool function's tool service keeps no Tool resources (no listTools/register)",
    );
  return { listTools: listTools.bind(service), register: register.bind(service) };
}

const namespaceOption = (r: { namespace?: string | undefined }) =>
  r.namespace !== undefined ? { namespace: r.namespace } : {};

/** A ToolResult as it crosses the wire: only the fields the protocol names. */
const wire = (r: ToolResult): ToolResult => ({
  content: r.content,
  ...(r.isError ? { isError: true } : {}),
  ...(r.pending ? { pending: r.pending } : {}),
});

/**
 * SettleTool (ToolPort.settle, for the turn step's deadline and the API function's push route): a
 * push about another task is `invalid` (nothing recorded), a push that says the remote still works
 * is `running`, anything else the call's recorded outcome.
 */
async function settle(
  service: ToolPort,
  request: Extract<ToolFunctionRequest, { op: "SettleTool" }>,
  context: ToolContext,
  done: (result: ToolResult, what: string) => { result: ToolResult },
): Promise<SettleToolResponse> {
  if (!service.settle)
    return { invalid: "This tool function cannot settle a call a remote agent was handed" };
  try {
    const result = await service.settle(request.tool, request.pending, request.pushed, context);
    return result ? done(result, "remote call settled") : { running: true };
  } catch (e) {
    if (e instanceof ValidationError) return { invalid: e.message };
    throw e;
  }
}

interface Instance {
  get(): Promise<ToolPort>;
  /** The resource notices of the writes so far published (the runtime's deferred announcer). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

function given(service: ToolPort): Instance {
  return { get: () => Promise.resolve(service), settled: () => Promise.resolve(), close: async () => {} };
}

/** The runtime and the tool service, built on an instance's first invocation and kept. */
function coldStart(deps: ToolFunctionDeps, metrics: InvocationMetrics): Instance {
  const init = async (): Promise<{ rt: AwsRuntime; service: ToolPort }> => {
    const config = awsConfigOf(deps, "Arbor's tool function");
    const plain = createAwsRuntime(config, deps.clients);
    const rt = withMeteredAudit(plain, metrics);
    try {
      return { rt, service: await openAwsToolService(rt, config, deps.tools) };
    } catch (error) {
      await rt.close();
      throw error;
    }
  };
  const started = memoisedStart(init, async (warm) => {
    await warm.service.close?.();
    await warm.rt.close();
  });
  return {
    get: async () => (await started.get()).service,
    settled: async () => (await started.get()).rt.resources.settled(),
    close: () => started.close(),
  };
}

/** The Lambda entry point; configured by the environment the engine stack sets. */
export const handler = createToolHandler();
