import { createHash } from "node:crypto";
import { z } from "zod";
import { deepFreeze } from "../../domain/immutable.ts";
import { formatIssues } from "../../domain/resources.ts";
import type { ToolContext, ToolDescriptor, ToolPort, ToolResult } from "../../ports/tools.ts";

/**
 * Built-in tools, defined once with a zod schema each: the JSON Schema the model sees is generated
 * from it, and the same schema validates the model's arguments before the tool runs.
 */
export interface BuiltinTool<S extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  schema: S;
  risky?: boolean;
  /** No effect outside Arbor (see ToolDescriptor.pure). Default false. */
  pure?: boolean;
  run(args: z.output<S>, context: ToolContext): Promise<string> | string;
}

export const defineTool = <S extends z.ZodObject>(tool: BuiltinTool<S>): BuiltinTool =>
  tool as unknown as BuiltinTool;

export const sha256Tool = defineTool({
  name: "sha256",
  pure: true,
  description: "SHA-256 hash of a text, as lowercase hex.",
  schema: z.object({ text: z.string().max(1_000_000) }),
  run: ({ text }) => createHash("sha256").update(text).digest("hex"),
});

export const wordCountTool = defineTool({
  name: "word_count",
  pure: true,
  description: "Counts the words in a text.",
  schema: z.object({ text: z.string().max(1_000_000) }),
  run: ({ text }) => String(text.split(/\s+/).filter(Boolean).length),
});

export const calculatorTool = defineTool({
  name: "calculator",
  pure: true,
  description: "Adds, subtracts, multiplies or divides two numbers.",
  schema: z.object({ a: z.number(), b: z.number(), op: z.enum(["add", "subtract", "multiply", "divide"]) }),
  run: ({ a, b, op }) => {
    if (op === "divide" && b === 0) throw new Error("division by zero");
    return String(op === "add" ? a + b : op === "subtract" ? a - b : op === "multiply" ? a * b : a / b);
  },
});

/** A stand-in for an action with side effects: it only records what it would send, and it is risky. */
export const sendEmailTool = defineTool({
  name: "send_email",
  description: "Sends an email. Needs a person's confirmation of the exact recipient, subject and body.",
  schema: z.object({ to: z.email(), subject: z.string().min(1).max(200), body: z.string().max(20_000) }),
  risky: true,
  run: ({ to, subject }) => `Email "${subject}" queued for ${to}`,
});

export const BUILTIN_TOOLS: readonly BuiltinTool[] = [
  sha256Tool,
  wordCountTool,
  calculatorTool,
  sendEmailTool,
];

export class BuiltinToolPort implements ToolPort {
  readonly #tools: Map<string, BuiltinTool>;
  /** Descriptors are made once per tool: converting a zod schema to JSON Schema is not free. */
  readonly #descriptors = new Map<string, ToolDescriptor>();

  constructor(tools: readonly BuiltinTool[] = BUILTIN_TOOLS) {
    this.#tools = new Map(tools.map((t) => [t.name, t]));
  }

  describe(names: readonly string[]): ToolDescriptor[] {
    return names.flatMap((name) => {
      const known = this.#descriptors.get(name);
      if (known) return [known];
      const t = this.#tools.get(name);
      if (!t) return [];
      const { $schema: _drop, ...parameters } = z.toJSONSchema(t.schema) as Record<string, unknown>;
      // Frozen, so every caller can share it.
      const descriptor = deepFreeze({
        name: t.name,
        description: t.description,
        parameters,
        risky: t.risky ?? false,
        pure: t.pure ?? false,
      });
      this.#descriptors.set(name, descriptor);
      return [descriptor];
    });
  }

  async execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult> {
    const tool = this.#tools.get(name);
    if (!tool)
      return {
        content: `Unknown tool "${name}". Use one of: ${[...this.#tools.keys()].join(", ")}`,
        isError: true,
      };
    const parsed = tool.schema.safeParse(args);
    if (!parsed.success)
      return {
        content: `Invalid arguments for ${name}: ${formatIssues(parsed.error).join("; ")}`,
        isError: true,
      };
    try {
      return { content: await tool.run(parsed.data, context) };
    } catch (e) {
      return { content: `${name} failed: ${(e as Error).message}`, isError: true };
    }
  }
}
