import type * as z from "zod";
import type { ToolContext } from "../../ports/tools.ts";

/**
 * The built-in functions a tool name can be bound to. Each is defined once with a zod schema: the
 * JSON Schema the model sees is generated from it, and the same schema checks the model's
 * arguments before the function runs.
 */
export interface BuiltinFunction<S extends z.ZodObject = z.ZodObject> {
  description: string;
  schema: S;
  /** Default for the tool's `risky` (configuration may make any tool risky). */
  risky?: boolean;
  /** No effect outside Arbor (see ToolDescriptor.pure). Default false. */
  pure?: boolean;
  /** Handled by the engine's step, never run here (ToolDescriptor.engine). */
  engine?: "ask_person";
  run(args: z.output<S>, context: ToolContext): Promise<string> | string;
}
