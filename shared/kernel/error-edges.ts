import { type ErrorCode, isArborError } from "./errors.ts";

/**
 * How every edge answers an ArborError, one row per code: the HTTP API (channels/http/http-kit.ts),
 * A2A over JSON-RPC (protocols/a2a/a2a-mapping.ts, channels/a2a/a2a-transport.ts), and the chat
 * channels (channels/chat/chat-parts.ts for Slack and Teams). The Lambda functions map no error of
 * their own: the API function answers through the HTTP edge, the others throw so that Lambda
 * retries. A new code gets its row here, or the type check fails.
 *
 *   const edge = ERROR_EDGES[error.code];   // { http, jsonRpc, retryable, shown }
 *   edgeOf(e)                               // the row of an ArborError; undefined for anything else
 *
 * `shown` says whether the message may reach the caller (an API or A2A client, a person in
 * Slack or Teams): it says what they did wrong or can do. A row that is not shown is answered
 * with a generic message and the error goes to the log: CONFIG, MODEL, TOOL, BUDGET and INTERNAL
 * messages name files, settings, endpoints and internals that are the operator's, not the caller's.
 */

/**
 * The JSON-RPC 2.0 error codes the A2A edge answers with (A2A reserves -32001..-32009 for its
 * own; the SDK's A2A_ERROR_CODE, which a unit test compares these with).
 */
export const JSON_RPC = {
  /** Invalid params: the request cannot be done as sent (A2A's RequestMalformedError). */
  INVALID_PARAMS: -32602,
  /** Internal error: the message is not shown, the error goes to the log. */
  INTERNAL_ERROR: -32603,
  /**
   * JSON-RPC's implementation-defined server error: JSON-RPC has no code for "may not", so a
   * refusal is this, with the HTTP status telling them apart (401 no known key, 403 refused).
   */
  PERMISSION_DENIED: -32000,
  /** A2A's TaskNotFoundError: also what anything of another tenant is answered with. */
  TASK_NOT_FOUND: -32001,
  /** A2A's UnsupportedOperationError: the request conflicts with how things stand. */
  UNSUPPORTED_OPERATION: -32004,
} as const;

export type JsonRpcErrorCode = (typeof JSON_RPC)[keyof typeof JSON_RPC];

/** The HTTP statuses errors are answered with. */
export type HttpErrorStatus = 400 | 403 | 404 | 409 | 413 | 429 | 500 | 503;

export interface ErrorEdge {
  /** The HTTP status (500 for every row that is not shown). */
  readonly http: HttpErrorStatus;
  /** The JSON-RPC error code an A2A caller gets. */
  readonly jsonRpc: JsonRpcErrorCode;
  /**
   * Whether the same request may succeed unchanged a little later: the HTTP edge sends
   * Retry-After, and a chat platform that retries (Teams activities, Slack events) is left to.
   */
  readonly retryable: boolean;
  /** Whether the message may be shown to the caller; otherwise a generic one, and the log. */
  readonly shown: boolean;
}

const { INVALID_PARAMS, INTERNAL_ERROR, PERMISSION_DENIED, TASK_NOT_FOUND, UNSUPPORTED_OPERATION } = JSON_RPC;

/** The one table: every ErrorCode, how each edge answers it. */
export const ERROR_EDGES: Readonly<Record<ErrorCode, ErrorEdge>> = {
  VALIDATION: { http: 400, jsonRpc: INVALID_PARAMS, retryable: false, shown: true },
  INVALID_URN: { http: 400, jsonRpc: INVALID_PARAMS, retryable: false, shown: true },
  TOO_LARGE: { http: 413, jsonRpc: INVALID_PARAMS, retryable: false, shown: true },
  FORBIDDEN: { http: 403, jsonRpc: PERMISSION_DENIED, retryable: false, shown: true },
  NOT_FOUND: { http: 404, jsonRpc: TASK_NOT_FOUND, retryable: false, shown: true },
  CONFLICT: { http: 409, jsonRpc: UNSUPPORTED_OPERATION, retryable: false, shown: true },
  DUPLICATE: { http: 409, jsonRpc: UNSUPPORTED_OPERATION, retryable: false, shown: true },
  // JSON-RPC has no "try again later": A2A answers these as internal errors (HTTP 500).
  THROTTLED: { http: 429, jsonRpc: INTERNAL_ERROR, retryable: true, shown: true },
  UNAVAILABLE: { http: 503, jsonRpc: INTERNAL_ERROR, retryable: true, shown: true },
  // Arbor's own configuration, state or budgets, never the caller's doing: logged, not shown.
  INVALID_PATTERN: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
  INVALID_TRANSITION: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
  CONFIG: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
  MODEL: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
  TOOL: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
  BUDGET: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
  INTERNAL: { http: 500, jsonRpc: INTERNAL_ERROR, retryable: false, shown: false },
};

/** The row of an ArborError; undefined for anything else (which every edge answers as INTERNAL). */
export const edgeOf = (error: unknown): ErrorEdge | undefined =>
  isArborError(error) ? ERROR_EDGES[error.code] : undefined;
