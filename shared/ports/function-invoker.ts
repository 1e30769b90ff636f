/**
 * One synchronous invocation of a cloud function a tool is bound to (a `lambda` entry of the tool
 * registry): the arguments go as the event, the function's result comes back as text. On AWS and
 * locally alike, the adapter is Lambda's Invoke (adapters/aws/lambda-invoker.ts), one client per
 * region, made only when a lambda tool exists.
 *
 * A function that throws answers with `functionError` (its payload the runtime's error JSON); an
 * invocation that fails throws, with the service's error name kept (ResourceNotFoundException,
 * AccessDeniedException, TooManyRequestsException, ...) so that the binding can say what to fix.
 */
export interface FunctionInvoker {
  invoke(request: FunctionInvocation): Promise<{ payload: string; functionError?: string }>;
  /** Lets go of the clients' connections. */
  close(): void;
}

export interface FunctionInvocation {
  /** A function name, `name:version-or-alias`, or the function's ARN. */
  functionName: string;
  qualifier?: string;
  /** The function's region (undefined: the SDK's default, AWS_REGION or the profile's). */
  region: string | undefined;
  /** The event: the model's arguments, as JSON. */
  payload: string;
  /** Base64 JSON the function reads as `context.clientContext` (the call's idempotency key). */
  clientContext?: string;
  signal?: AbortSignal;
}
