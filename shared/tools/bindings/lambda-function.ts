import {
  type ArborError,
  ConfigError,
  ThrottledError,
  ToolError,
  UnavailableError,
} from "../../kernel/errors.ts";
import type { FunctionInvoker } from "../../ports/function-invoker.ts";
import type { ToolBinding, ToolContext } from "../../ports/tools.ts";
import { LAMBDA_FUNCTION } from "../service/config.ts";
import { outsideTool } from "../service/json-schema.ts";

/**
 * A tool bound to an AWS Lambda function (through the function-invoker port): each call is one synchronous
 * Invoke (RequestResponse) with the arguments as the event, and the function's result, as the
 * text of its JSON payload, comes back to the model. A function that throws is the tool failing,
 * with its errorType and errorMessage; an Invoke that fails (no such function, no permission) is
 * too, with what to check. The call's idempotency key and attempt go in the Invoke's client
 * context (`context.clientContext.custom.idempotencyKey` and `.attempt` in a Node.js function), not
 * in the event, which stays the model's arguments.
 */
export interface LambdaFunctionSettings {
  /** A function name, `name:version-or-alias`, or the function's ARN. */
  function: string;
  /** A version or alias (when `function` names none). */
  qualifier?: string;
  /** Where the function is: for the error messages (the client is already in that region). */
  region?: string;
}

/** What a lambda entry of the tool registry says of its tool. */
export interface LambdaToolOptions {
  description: string;
  parameters: Record<string, unknown>;
  risky: boolean;
  settings: LambdaFunctionSettings;
}

export function lambdaFunctionBinding(
  name: string,
  options: LambdaToolOptions,
  functions: FunctionInvoker,
): ToolBinding {
  const { function: functionName, qualifier, region } = options.settings;
  const target = qualifier ? `${functionName} (${qualifier})` : functionName;
  return outsideTool(
    {
      name,
      kind: "lambda",
      description: options.description,
      parameters: options.parameters,
      risky: options.risky,
    },
    async (args: Record<string, unknown>, context: ToolContext) => {
      let response: { payload: string; functionError?: string };
      try {
        response = await functions.invoke({
          functionName,
          region,
          payload: JSON.stringify(args),
          ...(qualifier ? { qualifier } : {}),
          ...(context.idempotencyKey ? { clientContext: clientContext(context) } : {}),
          ...(context.signal ? { signal: context.signal } : {}),
        });
      } catch (cause) {
        if (context.signal?.aborted) throw cause; // the tool service reports its timeout
        throw invokeFailed(name, target, region, cause);
      }
      if (response.functionError) throw functionFailed(target, response.payload);
      return response.payload;
    },
  );
}

/** The client context a function reads as `context.clientContext` (base64 JSON; `custom` is ours). */
function clientContext(context: ToolContext): string {
  const custom = { idempotencyKey: context.idempotencyKey, attempt: context.attempt ?? 1 };
  return Buffer.from(JSON.stringify({ custom })).toString("base64");
}

/** What the function threw: the runtime's `{"errorType", "errorMessage", "trace"}`, trace left out. */
function functionFailed(target: string, payload: string): ArborError {
  let detail = payload;
  try {
    const body: unknown = JSON.parse(payload);
    if (body && typeof body === "object") {
      const { errorType, errorMessage } = body as Record<string, unknown>;
      const parts = [errorType, errorMessage].filter((p): p is string => typeof p === "string");
      if (parts.length) detail = parts.join(": ");
    }
  } catch {
    // not JSON: the payload as it is
  }
  return new ToolError(`the Lambda function ${target} returned an error: ${detail.slice(0, 500)}`);
}

/** Why Invoke itself failed, and what to check. */
function invokeFailed(tool: string, target: string, region: string | undefined, cause: unknown): ArborError {
  const name = cause instanceof Error ? cause.name : "Error";
  const said = cause instanceof Error ? cause.message : String(cause);
  const what = `${name}: ${said}`.slice(0, 500);
  const where = region ? ` in ${region}` : "";
  const failed = (next: string) => `cannot invoke the Lambda function ${target}${where} (${what}): ${next}`;
  if (name === "ResourceNotFoundException")
    return new ConfigError(
      failed(
        `check tools.${tool}.function (the name or ARN, and its version or alias) and the region it is in`,
      ),
      { cause },
    );
  if (name === "AccessDeniedException")
    return new ConfigError(failed("grant the role Arbor runs as lambda:InvokeFunction on that function"), {
      cause,
    });
  if (name === "TooManyRequestsException")
    return new ThrottledError(
      failed("the function is throttled: try again later, or raise its concurrency"),
      {
        cause,
      },
    );
  if (name === "CredentialsProviderError")
    return new ConfigError(
      failed("Arbor has no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID, or run with a role"),
      { cause },
    );
  if (/region is missing/i.test(said))
    return new ConfigError(failed(`set tools.${tool}.region, give the function's ARN, or set AWS_REGION`), {
      cause,
    });
  return new UnavailableError(
    failed(
      `check tools.${tool}.function (the name or ARN) and that Arbor's role may call lambda:InvokeFunction on it`,
    ),
    { cause },
  );
}

/** A lambda tool's binding, its region worked out: its `region`, else its ARN's, else the SDK's default. */
export function lambdaBinding(
  name: string,
  options: LambdaToolOptions,
  functions: FunctionInvoker,
): ToolBinding {
  const region = options.settings.region ?? LAMBDA_FUNCTION.exec(options.settings.function)?.groups?.region;
  const settings = { ...options.settings, ...(region ? { region } : {}) };
  return lambdaFunctionBinding(name, { ...options, settings }, functions);
}
