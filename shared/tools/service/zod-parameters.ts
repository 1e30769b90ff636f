import * as z from "zod";
import { deepFreeze } from "../../domain/immutable.ts";

/** Converted schemas: the built-ins' schemas are module constants, converted once per process. */
const converted = new WeakMap<z.ZodType, Record<string, unknown>>();

/**
 * A built-in's zod schema as the JSON Schema the model sees (what it may send, without `$schema`).
 * The same object for the same schema (frozen: callers copy what they change).
 */
export function parametersOf(schema: z.ZodType): Record<string, unknown> {
  const known = converted.get(schema);
  if (known) return known;
  const { $schema: _drop, ...parameters } = z.toJSONSchema(schema, { io: "input" }) as Record<
    string,
    unknown
  >;
  const frozen = deepFreeze(parameters);
  converted.set(schema, frozen);
  return frozen;
}
