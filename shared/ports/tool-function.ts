import type { ArborError } from "../kernel/errors.ts";

/**
 * The tool function (functions/tool.ts) as the engine's steps reach it on AWS: one request, its
 * JSON answer. The adapter (adapters/aws/tool-function-invoke.ts) is a synchronous Lambda Invoke;
 * the tool port over it (tools/service/tool-function-port.ts) knows the requests and their answers.
 */
export interface ToolFunctionClient {
  /** The function's name or ARN, for messages. */
  readonly functionName: string;
  /**
   * One request, answered within `timeoutMs` (default TOOL_FUNCTION_TIMEOUT_MS plus 10 s), its
   * tries included. A throttled request is tried again (the function did not run); anything else
   * that goes wrong throws, to be mapped by `errorOf`.
   */
  invoke(
    request: { readonly op: string },
    timeoutMs?: number,
    signal?: AbortSignal,
  ): Promise<{ payload: unknown }>;
  /** What went wrong, in the error taxonomy; `details.mayHaveRun` when the tool may have started. */
  errorOf(e: unknown): ArborError;
  /** Lets go of the connection, when this client owns it. */
  close(): void;
}

/** The tool function's timeout (the engine stack sets it): a call's answer comes within it. */
export const TOOL_FUNCTION_TIMEOUT_MS = 240_000;

/**
 * The longest a tool may run on a deployed stack (its `timeoutMs`, default 30 s): ten seconds under
 * the function's timeout, so the tool service records the outcome before Lambda stops the function.
 * The steps that run tools (ready, turn) wait for the answer; they run for 5 minutes at most.
 */
export const TOOL_CALL_MAX_MS = TOOL_FUNCTION_TIMEOUT_MS - 10_000;
