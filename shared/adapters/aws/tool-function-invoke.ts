import { setTimeout as sleep } from "node:timers/promises";
import { InvokeCommand, type InvokeCommandOutput, type LambdaClient } from "@aws-sdk/client-lambda";
import {
  ArborError,
  ConfigError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../kernel/errors.ts";
import { TOOL_FUNCTION_TIMEOUT_MS, type ToolFunctionClient } from "../../ports/tool-function.ts";

/**
 * One request to the tool function (functions/tool.ts) as the tool port sends it: a synchronous
 * Invoke, bounded, a throttled one tried again (the function did not run), and whatever went wrong
 * mapped to the error taxonomy (`details.mayHaveRun` when the tool may have started).
 */
const DEFAULT_INVOKE_TIMEOUT_MS = TOOL_FUNCTION_TIMEOUT_MS + 10_000;
const THROTTLE_BACKOFF_MS = [200, 1_000, 3_000];

export interface InvokeOptions {
  /** With `maxAttempts: 1` (only a throttled Invoke, which did not run the function, is tried again). */
  client: LambdaClient;
  /** The tool function's name or ARN (ARBOR_TOOL_FUNCTION). */
  functionName: string;
  /** Waits between throttled attempts (default 0.2, 1 and 3 s); tests make them short. */
  throttleBackoffMs?: readonly number[];
  /** Destroy the client on close (default: false, the caller owns it). */
  ownsClient?: boolean;
}

/** The tool function over Lambda's Invoke. */
export function lambdaToolFunction(options: InvokeOptions): ToolFunctionClient {
  return {
    functionName: options.functionName,
    invoke: (request, timeoutMs, signal) => invoke(options, request, timeoutMs, signal),
    errorOf: (e) => asToolFunctionError(options.functionName, e),
    close: () => {
      if (options.ownsClient) options.client.destroy();
    },
  };
}

/**
 * One Invoke of the tool function; a throttled one is tried again (the function did not run). One
 * deadline, `timeoutMs`, bounds the tries and the waits between them.
 */
export async function invoke(
  options: InvokeOptions,
  request: { readonly op: string },
  timeoutMs = DEFAULT_INVOKE_TIMEOUT_MS,
  signal?: AbortSignal,
): Promise<{ payload: unknown }> {
  const backoff = options.throttleBackoffMs ?? THROTTLE_BACKOFF_MS;
  const timeout = AbortSignal.timeout(timeoutMs);
  const abortSignal = signal ? AbortSignal.any([signal, timeout]) : timeout;
  for (let attempt = 0; ; attempt++) {
    let response: InvokeCommandOutput;
    try {
      response = await options.client.send(
        new InvokeCommand({
          FunctionName: options.functionName,
          InvocationType: "RequestResponse",
          Payload: JSON.stringify(request),
        }),
        { abortSignal },
      );
    } catch (e) {
      if (isThrottled(e)) {
        const wait = backoff[attempt];
        if (wait !== undefined && (await waited(wait, abortSignal))) continue;
        throw e; // the tries or the time ran out while throttled: the function did not run
      }
      if (timeout.aborted)
        throw new UnavailableError(`the tool function did not answer within ${timeoutMs} ms`, {
          cause: e,
          details: { mayHaveRun: true, timedOut: true },
        });
      throw e;
    }
    const text = response.Payload?.transformToString("utf-8") ?? "";
    if (response.FunctionError) throw functionError(text);
    try {
      return { payload: text ? JSON.parse(text) : null };
    } catch (cause) {
      throw new UnavailableError("the tool function's answer is not JSON", {
        cause,
        details: { mayHaveRun: true },
      });
    }
  }
}

/** Waits `ms`: false when `signal` aborts first. */
const waited = (ms: number, signal: AbortSignal): Promise<boolean> =>
  sleep(ms, undefined, { signal }).then(
    () => true,
    () => false,
  );

const isThrottled = (e: unknown) =>
  e instanceof Error && (e.name === "TooManyRequestsException" || e.name === "ThrottlingException");

/** The function threw or Lambda stopped it: `{"errorType", "errorMessage"}` (the trace is left out). */
function functionError(payload: string): ArborError {
  let type = "Unhandled";
  let message = payload.slice(0, 500);
  try {
    const body = JSON.parse(payload) as Record<string, unknown>;
    if (typeof body.errorType === "string") type = body.errorType;
    if (typeof body.errorMessage === "string") message = body.errorMessage.slice(0, 1_000);
  } catch {
    // not JSON: the payload as it is
  }
  const timedOut = type === "Sandbox.Timedout" || /Task timed out/i.test(message);
  if (timedOut)
    return new UnavailableError(`the tool function timed out (${message})`, {
      details: { mayHaveRun: true, timedOut: true, errorType: type },
    });
  if (type === "ValidationError")
    return new ValidationError(`the tool function refused the request (${message})`);
  return new UnavailableError(`the tool function failed (${type}: ${message})`, {
    details: { mayHaveRun: true, errorType: type },
  });
}

/** What went wrong, in the error taxonomy; `details.mayHaveRun` when the tool may have started. */
export function asToolFunctionError(functionName: string, e: unknown): ArborError {
  if (e instanceof ArborError) return e; // already said (a ThrottledError is not "may have run")
  const name = e instanceof Error ? e.name : "Error";
  const what = `${name}: ${e instanceof Error ? e.message : String(e)}`.slice(0, 500);
  if (isThrottled(e))
    return new ThrottledError(
      `the tool function ${functionName} is throttled (${what}); try again later, or raise its concurrency`,
      { cause: e },
    );
  if (name === "ResourceNotFoundException")
    return new ConfigError(
      `the tool function ${functionName} does not exist (${what}): set ARBOR_TOOL_FUNCTION to the engine stack's output ToolFunctionName`,
      { cause: e },
    );
  if (name === "AccessDeniedException")
    return new ConfigError(
      `this function may not invoke the tool function ${functionName} (${what}): only the ready and turn steps hold lambda:InvokeFunction on it`,
      { cause: e },
    );
  // The request may have reached the function (a connection reset after it was sent).
  return new UnavailableError(`the tool function ${functionName} could not be reached (${what})`, {
    cause: e,
    details: { mayHaveRun: true },
  });
}
