import { Ajv, type ErrorObject } from "ajv";
import addFormats from "ajv-formats";
import { ValidationError } from "../../kernel/errors.ts";
import type { ToolBinding, ToolDescriptor } from "../../ports/tools.ts";

/**
 * Arguments checked against a tool's JSON Schema (the parameters of an HTTP, Lambda, MCP or A2A
 * tool come as JSON Schema, not zod). A schema that does not compile fails when the tool is
 * configured, not when the model first calls it.
 */
let ajv: Ajv | undefined;
/** Made at the first schema (a few ms of every cold start otherwise, in functions that check none). */
function compiler(): Ajv {
  if (!ajv) {
    ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false, useDefaults: false });
    addFormats.default(ajv);
  }
  return ajv;
}

export function jsonSchemaChecker(
  schema: Record<string, unknown>,
  where: string,
): (args: Record<string, unknown>) => string[] {
  let validate: ReturnType<Ajv["compile"]>;
  try {
    validate = compiler().compile(schema);
  } catch (cause) {
    throw new ValidationError(`${where}: the parameters are not a valid JSON Schema`, [
      (cause as Error).message,
    ]);
  }
  return (args) => (validate(args) ? [] : (validate.errors ?? []).map(describeError));
}

function describeError(e: ErrorObject): string {
  const field = e.instancePath ? e.instancePath.slice(1).replaceAll("/", ".") : "(arguments)";
  if (e.keyword === "required")
    return `${field === "(arguments)" ? "" : `${field}.`}${e.params.missingProperty}: is required`;
  if (e.keyword === "additionalProperties")
    return `${e.params.additionalProperty}: is not a parameter of this tool`;
  return `${field}: ${e.message ?? "is invalid"}`;
}

/**
 * The binding of a tool that reaches outside Arbor (an HTTP endpoint, a Lambda function, an MCP
 * server, an A2A agent): its JSON Schema checks the arguments, and it is never pure.
 */
export function outsideTool(descriptor: Omit<ToolDescriptor, "pure">, run: ToolBinding["run"]): ToolBinding {
  return {
    descriptor: { ...descriptor, pure: false },
    check: jsonSchemaChecker(descriptor.parameters, `tools.${descriptor.name}`),
    run,
  };
}
