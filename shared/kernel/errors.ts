/**
 * One application error base for all of Arbor. Every error has a stable `code`, a message that
 * says what went wrong and (where it helps) what to do next, and an optional `cause`.
 * Mapping to HTTP status, JSON-RPC codes, Slack or Teams replies happens at the edges only, by
 * the one table of error-edges.ts (a row per code: status, JSON-RPC code, retryable, shown).
 */
export type ErrorCode =
  | "VALIDATION"
  | "INVALID_URN"
  | "INVALID_PATTERN"
  | "INVALID_TRANSITION"
  | "NOT_FOUND"
  | "CONFLICT"
  | "DUPLICATE"
  | "TOO_LARGE"
  | "CONFIG"
  | "UNAVAILABLE"
  | "THROTTLED"
  | "MODEL"
  | "TOOL"
  | "BUDGET"
  | "FORBIDDEN"
  | "INTERNAL";

export class ArborError extends Error {
  readonly code: ErrorCode;
  /** Structured detail for logs and edge mappers; never includes secrets. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.details = options.details ?? {};
  }
}

/** Input failed a schema or rule: the caller can fix it. Nothing was written. */
export class ValidationError extends ArborError {
  readonly issues: readonly string[];
  constructor(message: string, issues: readonly string[] = [], options: { cause?: unknown } = {}) {
    super("VALIDATION", issues.length ? `${message}: ${issues.join("; ")}` : message, {
      ...options,
      details: { issues },
    });
    this.issues = issues;
  }
}

export class InvalidUrnError extends ArborError {
  constructor(urn: string, reason: string) {
    super("INVALID_URN", `Invalid URN ${JSON.stringify(urn)}: ${reason}`, { details: { urn, reason } });
  }
}

export class InvalidPatternError extends ArborError {
  constructor(message: string, path: readonly string[] = []) {
    super(
      "INVALID_PATTERN",
      path.length
        ? `Invalid event pattern at ${path.join(".")}: ${message}`
        : `Invalid event pattern: ${message}`,
      {
        details: { path },
      },
    );
  }
}

export class InvalidTransitionError extends ArborError {
  constructor(taskId: string, from: string, eventType: string) {
    super("INVALID_TRANSITION", `Task ${taskId} cannot take ${eventType} while ${from}`, {
      details: { taskId, from, eventType },
    });
  }
}

export class NotFoundError extends ArborError {
  constructor(what: string, id: string) {
    super("NOT_FOUND", `${what} not found: ${id}`, { details: { what, id } });
  }
}

/** A conditional write lost: someone else changed the record or stream first. Re-read and retry. */
export class ConflictError extends ArborError {
  constructor(message: string, details: Record<string, unknown> = {}, options: { cause?: unknown } = {}) {
    super("CONFLICT", message, { ...options, details });
  }
}

export class TooLargeError extends ArborError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super("TOO_LARGE", message, { details });
  }
}

export class ConfigError extends ArborError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super("CONFIG", message, options);
  }
}

/** A backend (S3, DynamoDB, EventBridge, disk) could not be reached or failed; safe to retry. */
export class UnavailableError extends ArborError {
  constructor(message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super("UNAVAILABLE", message, options);
  }
}

/** The backend asked us to slow down and retries ran out; try again later. */
export class ThrottledError extends ArborError {
  constructor(message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super("THROTTLED", message, options);
  }
}

/** The model answered with something unusable (refused, malformed tool call, filtered content). */
export class ModelError extends ArborError {
  constructor(message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super("MODEL", message, options);
  }
}

/**
 * A tool outside Arbor (an HTTP endpoint, an MCP server, a Lambda function, another agent) ran
 * and failed, or answered with something unusable: the call's outcome says why, for the model.
 */
export class ToolError extends ArborError {
  constructor(message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super("TOOL", message, options);
  }
}

/** A budget (depth, fan-out, turns, tokens, cost, rounds, wall time) ran out. */
export class BudgetExceededError extends ArborError {
  constructor(budget: string, limit: number, used: number) {
    super("BUDGET", `Budget ${budget} exhausted: used ${used} of ${limit}`, {
      details: { budget, limit, used },
    });
  }
}

export const isArborError = (e: unknown): e is ArborError => e instanceof ArborError;

/** A policy denied the action (default deny: anything but an explicit allow). */
export class ForbiddenError extends ArborError {
  constructor(message: string, options: { decisionId?: string; cause?: unknown } = {}) {
    super("FORBIDDEN", message, {
      ...(options.decisionId ? { details: { decisionId: options.decisionId } } : {}),
      ...(options.cause ? { cause: options.cause } : {}),
    });
    this.name = "ForbiddenError";
  }
}
