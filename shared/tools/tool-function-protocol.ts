import { z } from "zod";

/**
 * What the engine and the tool function (functions/tool.ts) say to each other over a Lambda
 * Invoke: the tool service's ListTools and ExecuteTool (seeds/001), as JSON. Both sides parse with
 * these schemas, so a change to one side that the other cannot read fails loudly, naming the field.
 */

/** The ToolContext fields that cross the wire (the signal stays behind; the service sets the key). */
const CallContextSchema = z.object({
  taskId: z.string().min(1).max(1000),
  actor: z.string().min(1).max(1000),
  callId: z.string().min(1).max(128),
  allowedTools: z.array(z.string().min(1).max(200)).max(1000).optional(),
});

export const ToolFunctionRequestSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("ListTools") }).strict(),
  z
    .object({
      op: z.literal("ExecuteTool"),
      tool: z.string().min(1).max(200),
      arguments: z.record(z.string(), z.unknown()),
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
});

export const ListToolsResponseSchema = z.object({ tools: z.array(ToolDescriptorSchema) });
export type ListToolsResponse = z.infer<typeof ListToolsResponseSchema>;

export const ExecuteToolResponseSchema = z.object({
  result: z.object({ content: z.string(), isError: z.boolean().optional() }),
});
export type ExecuteToolResponse = z.infer<typeof ExecuteToolResponseSchema>;
