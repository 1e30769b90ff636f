import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type * as z from "zod";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../domain/input-limits.ts";
import { formatIssues } from "../../domain/resources.ts";
import { isWithin, tenantUrn } from "../../domain/urn.ts";
import type { Asker } from "../../engine/engine.ts";
import { ERROR_EDGES } from "../../kernel/error-edges.ts";
import { type ArborError, isArborError, NotFoundError, ValidationError } from "../../kernel/errors.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import type { Authenticated } from "../../ports/key-store.ts";

/**
 * What every route of the HTTP API shares, kept apart from the app that mounts them (http-api.ts)
 * so that a route never imports its parent: the caller of a request, its tenant's URNs, the JSON
 * body, and the one mapping from errors to responses.
 */
/** The logger the API reports unexpected failures to. */
export type HttpApiLog = Pick<ArborLogger, "error">;

export type ApiEnv = { Variables: { who: Authenticated; requestId: string } };

/** The one error shape of the API: `{ error: { code, message, details? } }`. */
export function errorBody(code: string, message: string, details: Readonly<Record<string, unknown>> = {}) {
  const kept = Object.entries(details).filter(([, v]) => !(Array.isArray(v) && v.length === 0));
  return { error: { code, message, ...(kept.length > 0 ? { details: Object.fromEntries(kept) } : {}) } };
}

export const taskPath = (urn: string) => `/v1/tasks/${encodeURIComponent(urn)}`;

/** The caller as the engine's entry points take it: the key's actor, tenant and roles. */
export const asker = (c: Context<ApiEnv>): Required<Asker> => {
  const { actor, caller } = c.get("who");
  return { actor, caller };
};

/**
 * `urn` when it lies in the caller's tenant. Anything else (another tenant's, whether it exists
 * there or not, well-formed or not; no URN at all) gets the one answer a made-up URN gets: 404
 * `<what> not found`, before anything is read and before the body is looked at, so that neither
 * the status nor the message tells a caller what another tenant has.
 */
export function ownUrn(c: Context<ApiEnv>, what: string, urn: string): string {
  return withinTenant(c.get("who"), what, urn);
}

/** `urn` when it lies in the tenant of `who`; else the NotFoundError `ownUrn` throws. */
export function withinTenant(who: Authenticated, what: string, urn: string): string {
  if (!isWithin(urn, tenantUrn(who.caller.tenant))) throw new NotFoundError(what, urn);
  return urn;
}

/**
 * The JSON body (empty counts as `{}`), parsed with `schema`; ValidationError names each bad field.
 * `first` looks at the parsed JSON before the schema does (the tenant of a URN in it, say).
 */
export async function readJson<S extends z.ZodType>(
  c: Context,
  schema: S,
  first?: (raw: unknown) => void,
): Promise<z.output<S>> {
  const text = await c.req.text();
  let raw: unknown = {};
  if (text.trim() !== "") {
    try {
      raw = JSON.parse(text);
    } catch (cause) {
      throw new ValidationError(`The request body is not valid JSON (${(cause as Error).message})`);
    }
  }
  if (nestsDeeperThan(raw, MAX_JSON_DEPTH))
    throw new ValidationError(`The request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  first?.(raw);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new ValidationError("The request body is not valid", formatIssues(parsed.error));
  return parsed.data;
}

/** Unknown routes: the API's error shape, never HTML. */
export const notFoundJson = (c: Context) =>
  c.json(errorBody("NOT_FOUND", `There is no route ${c.req.method} ${c.req.path}`), 404);

/**
 * The one mapping from errors to responses, by the table of kernel/error-edges.ts: an ArborError
 * whose message may be shown gets its code's status and message (and Retry-After when trying again
 * shortly may work: the database locked by another process, a backend throttling); anything else
 * is a 500 with a generic message, and the error goes to the log.
 */
export function errorHandler(log: HttpApiLog) {
  return (error: Error, c: Context): Response => {
    const edge = isArborError(error) ? ERROR_EDGES[error.code] : undefined;
    if (edge?.shown) {
      const { code, message, details } = error as ArborError;
      if (edge.retryable) c.header("Retry-After", String(details.retryAfterSeconds ?? 1));
      return c.json(errorBody(code, message, details), edge.http);
    }
    if (error instanceof HTTPException && error.status < 500) {
      return c.json(
        errorBody(error.status === 413 ? "TOO_LARGE" : "VALIDATION", error.message),
        error.status,
      );
    }
    const id = (c.get("requestId") as string | undefined) ?? "";
    log.error("HTTP request failed", { requestId: id, method: c.req.method, path: c.req.path, error });
    return c.json(
      errorBody(
        "INTERNAL",
        `Something went wrong on our side${id ? ` (request id ${id})` : ""}; try again later`,
      ),
      500,
    );
  };
}
