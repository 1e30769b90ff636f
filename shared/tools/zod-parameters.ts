import { z } from "zod";

/** A built-in's zod schema as the JSON Schema the model sees (what it may send, without `$schema`). */
export function parametersOf(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _drop, ...parameters } = z.toJSONSchema(schema, { io: "input" }) as Record<
    string,
    unknown
  >;
  return parameters;
}
