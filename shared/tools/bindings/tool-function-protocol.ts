import * as z from "zod";
import { TRACEPARENT } from "../../kernel/trace-context.ts";

/**
 * What the engine and the tool function (functions/tool.ts) say to each other over a Lambda
 * Invoke: the tool service's ListTools and ExecuteTool (seeds/001), as JSON. Both sides parse with
 * these schemas, so a change to one side that the other cannot read fails loudly, naming the field.
 */

/**
 * A callback the turn step made and recorded before the call (ToolContext.callback): an A2A agent
 * that offers push is given it, and the call comes back pending instead of waiting.
 */
const GivenCallbackSchema = z
  .object({
    callbackId: z.string().regex(/^[A-Za-z0-9_-]{16,64}$/),
    token: z.string().min(32).max(128),
    url: z.url().max(2000),
  })
  .strict();

/**
 * An activity's call and the messages its task scoped in (ToolContext.activity, ports/tools.ts):
 * the engine sends them, the activity's handler gets them as `(call, tool, context)`.
 */
const ActivityInvocationSchema = z
  .object({
    call: z
      .object({
        id: z.string().min(1).max(128),
        name: z.string().min(1).max(200),
        arguments: z.record(z.string(), z.unknown()),
        _outputPath: z.string().max(500).optional(),
        _instance: z.string().max(200).optional(),
        outputPaths: z.array(z.string().min(1).max(500)).max(8).optional(),
      })
      .strict(),
    context: z
      .array(
        z
          .object({
            role: z.enum(["user", "assistant", "tool"]),
            content: z.string().max(10_000),
            urn: z.string().max(2000).optional(),
          })
          .strict(),
      )
      .max(50),
  })
  .strict();

/** The ToolContext fields that cross the wire (the signal stays behind; the service sets the key). */
const CallContextSchema = z.object({
  taskId: z.string().min(1).max(1000),
  actor: z.string().min(1).max(1000),
  callId: z.string().min(1).max(128),
  allowedTools: z.array(z.string().min(1).max(200)).max(1000).optional(),
  callback: GivenCallbackSchema.optional(),
  activity: ActivityInvocationSchema.optional(),
  /** The caller's W3C trace context (kernel/tracing.ts): the call's spans join the request's trace. */
  traceparent: z.string().regex(TRACEPARENT).optional(),
});

/** A call out on a remote agent (ToolResult.pending, ports/tools.ts PendingCall). */
const PendingCallSchema = z
  .object({
    callbackId: z.string().min(1).max(200),
    tokenHash: z.string().regex(/^[0-9a-f]{64}$/),
    remoteTaskId: z.string().min(1).max(1000),
    deadline: z.iso.datetime(),
    attempt: z.number().int().min(1),
    argumentsHash: z.string().min(1).max(200),
  })
  .strict();

/** A tenant id, as URNs take it (domain/urn.ts). */
const TenantIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, "a tenant id: 1-128 of A-Z a-z 0-9 _ -");

export const ToolFunctionRequestSchema = z.discriminatedUnion("op", [
  // Without a tenant: the configured tools (a port's cold start). With one: ListTools of seeds/001,
  // the tenant's stored Tool resources (registered first if need be), of `namespace` or all. The
  // namespace is checked by the service (tools/service/tool-registry.ts), which says what one may be.
  z
    .object({
      op: z.literal("ListTools"),
      tenant: TenantIdSchema.optional(),
      namespace: z.string().max(1000).optional(),
    })
    .strict(),
  // ToolPort.register: the tenant's Tool resources made the configuration's.
  z.object({ op: z.literal("RegisterTools"), tenant: TenantIdSchema }).strict(),
  z
    .object({
      op: z.literal("ExecuteTool"),
      tool: z.string().min(1).max(200),
      arguments: z.record(z.string(), z.unknown()),
      context: CallContextSchema,
    })
    .strict(),
  // ToolPort.settle: a pending call, with the remote's push (absent: its deadline passed).
  z
    .object({
      op: z.literal("SettleTool"),
      tool: z.string().min(1).max(200),
      pending: PendingCallSchema,
      pushed: z.unknown().optional(),
      context: CallContextSchema,
    })
    .strict(),
]);
export type ToolFunctionRequest = z.infer<typeof ToolFunctionRequestSchema>;

export const ToolDescriptorSchema = z.object({
  name: z.string().min(1),
  description: z.string(),
  parameters: z.record(z.string(), z.unknown()),
  kind: z.enum(["builtin", "http", "lambda", "mcp", "a2a"]),
  risky: z.boolean(),
  pure: z.boolean(),
  namespace: z.string().min(1).max(64).optional(),
  activity: z.boolean().optional(),
  outputSchema: z.record(z.string(), z.unknown()).optional(),
  engine: z.literal("ask_person").optional(),
});

export const ListToolsResponseSchema = z.object({ tools: z.array(ToolDescriptorSchema) });
export type ListToolsResponse = z.infer<typeof ListToolsResponseSchema>;

export const RegisterToolsResponseSchema = z.object({
  registration: z.object({
    written: z.array(z.string()),
    deleted: z.array(z.string()),
    registryHash: z.string().min(1),
    urns: z.array(z.string()),
  }),
});
export type RegisterToolsResponse = z.infer<typeof RegisterToolsResponseSchema>;

const ToolResultSchema = z.object({
  content: z.string(),
  isError: z.boolean().optional(),
  pending: PendingCallSchema.optional(),
});

export const ExecuteToolResponseSchema = z.object({ result: ToolResultSchema });
export type ExecuteToolResponse = z.infer<typeof ExecuteToolResponseSchema>;

/**
 * SettleTool's answer: the call's result; `running` when the push says the remote still works
 * (nothing recorded); `invalid` when the push is not about the call's task (nothing recorded).
 */
export const SettleToolResponseSchema = z.union([
  z.object({ result: ToolResultSchema }).strict(),
  z.object({ running: z.literal(true) }).strict(),
  z.object({ invalid: z.string() }).strict(),
]);
export type SettleToolResponse = z.infer<typeof SettleToolResponseSchema>;
