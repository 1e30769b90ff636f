import { setTimeout as sleepFor } from "node:timers/promises";
import { ERROR_EDGES } from "../../shared/kernel/error-edges.ts";
import { ArborError, type ErrorCode, ValidationError } from "../../shared/kernel/errors.ts";
import type { RemoteConfig } from "../../shared/runtime/config.ts";
import { printable } from "./render.ts";

/**
 * The CLI's client of a remote Arbor (ARBOR_URL + ARBOR_KEY): a deployed stack's API or another
 * machine's `arbor serve`, through the HTTP API only.
 *
 * What it retries, and what it never does twice:
 *   - GETs and PUTs (reads, and a team, which is idempotent): on a network error, 429 (after its
 *     Retry-After), 502, 503 and 504, with backoff, a few times;
 *   - POSTs (an answer, a cancel): only on 429, which the API answers before reading the request
 *     and which changes nothing. Any other failure of such a POST is reported, never sent again.
 *   - A POST with an idempotency key (a message: `Idempotency-Key`, one per command) is repeated
 *     like a read: the API answers a repeat with the first answer and writes nothing new.
 * Every failure is a RemoteError whose message says what happened and what to do; so is an answer
 * that is not the JSON the API answers (a `Shape` the caller names: an ARBOR_URL that is some
 * other service), rather than a failure deep in the CLI. What a server says is printed without
 * control characters.
 */
export class RemoteError extends ArborError {
  override readonly name = "RemoteError";
  /** The HTTP status, 0 when the server was not reached. */
  readonly status: number;

  /** `apiCode`: the code the API answered with (`FORBIDDEN`, `CONFLICT`...), when it gave one. */
  constructor(message: string, status: number, apiCode?: string) {
    super(codeOf(status, apiCode), message, { details: { status } });
    this.status = status;
  }
}

/** The API's own code when it is one of Arbor's, else what the status says. */
function codeOf(status: number, apiCode: string | undefined): ErrorCode {
  if (apiCode !== undefined && Object.hasOwn(ERROR_EDGES, apiCode)) return apiCode as ErrorCode;
  if (status === 401 || status === 403) return "FORBIDDEN";
  if (status === 404) return "NOT_FOUND";
  if (status === 409) return "CONFLICT";
  if (status === 413) return "TOO_LARGE";
  if (status === 429) return "THROTTLED";
  if (status >= 300 && status < 400) return "CONFIG"; // ARBOR_URL is not where the API is
  if (status >= 400 && status < 500) return "VALIDATION";
  return "UNAVAILABLE"; // not reached, failed (5xx), or not an Arbor answer
}

export interface RemoteOptions {
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<unknown>;
  /** Attempts of a request that may be repeated (default 4). */
  attempts?: number;
  /** The longest a Retry-After is waited for before giving up (default 60 s). */
  maxWaitMs?: number;
}

/** The top-level fields an answer must have, each an array, an object or a string. */
export type Shape = Readonly<Record<string, "array" | "object" | "string">>;

const RETRYABLE = new Set([502, 503, 504]);
const REQUEST_TIMEOUT_MS = 30_000;

export class Remote {
  readonly url: string;
  /** Where it is and the key (for the resource-events stream, which reads with its own fetch). */
  readonly config: RemoteConfig;
  readonly #key: string;
  readonly #fetch: typeof fetch;
  readonly #sleep: (ms: number) => Promise<unknown>;
  readonly #attempts: number;
  readonly #maxWaitMs: number;

  constructor(config: RemoteConfig, options: RemoteOptions = {}) {
    this.config = config;
    this.url = config.url;
    this.#key = config.key;
    this.#fetch = options.fetch ?? fetch;
    this.#sleep = options.sleep ?? sleepFor;
    this.#attempts = options.attempts ?? 4;
    this.#maxWaitMs = options.maxWaitMs ?? 60_000;
  }

  get<T>(path: string, shape?: Shape): Promise<T> {
    return this.#request<T>("GET", path, undefined, true, undefined, shape);
  }

  put<T>(path: string, body: unknown, shape?: Shape): Promise<T> {
    return this.#request<T>("PUT", path, body, true, undefined, shape);
  }

  /** A DELETE: idempotent, so repeated like a read. */
  delete<T>(path: string, shape?: Shape): Promise<T> {
    return this.#request<T>("DELETE", path, undefined, true, undefined, shape);
  }

  /**
   * A POST: sent once (again only after a 429, which the server refused before reading it); with
   * `idempotencyKey`, repeated like a read, the same key each time, which the API answers once.
   */
  /** Bytes as the body (a document's), with their type; sent again on a failure, as adding them twice is once. */
  postBytes<T>(path: string, bytes: Uint8Array, contentType: string, shape?: Shape): Promise<T> {
    return this.#request<T>("POST", path, new RawBody(bytes, contentType), true, undefined, shape);
  }

  post<T>(path: string, body: unknown, options: { idempotencyKey?: string; shape?: Shape } = {}): Promise<T> {
    const { idempotencyKey, shape } = options;
    return this.#request<T>("POST", path, body, idempotencyKey !== undefined, idempotencyKey, shape);
  }

  async #request<T>(
    method: string,
    path: string,
    body: unknown,
    repeatable: boolean,
    idempotencyKey?: string,
    shape?: Shape,
  ): Promise<T> {
    const target = `${this.url}${path}`;
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= this.#attempts;
      let response: Response;
      try {
        response = await this.#fetch(target, {
          method,
          headers: {
            authorization: `Bearer ${this.#key}`,
            accept: "application/json",
            ...(body === undefined
              ? {}
              : { "content-type": body instanceof RawBody ? body.type : "application/json" }),
            ...(idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey }),
          },
          ...(body === undefined
            ? {}
            : { body: body instanceof RawBody ? body.bytes : JSON.stringify(body) }),
          redirect: "manual",
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (cause) {
        const why = describeNetworkError(cause);
        if (repeatable && !last) {
          await this.#sleep(backoff(attempt));
          continue;
        }
        throw new RemoteError(
          repeatable
            ? `Cannot reach Arbor at ${this.url} (${why}). Is ARBOR_URL right, and the server running?`
            : `Cannot reach Arbor at ${this.url} (${why}). The ${method} ${path.split("?")[0]} may or may not have ` +
                "arrived; it was not sent again (look before you repeat it, e.g. with arbor ls).",
          0,
        );
      }
      if (response.ok) {
        if (response.status === 204 && !shape) return undefined as T;
        let answer: unknown;
        try {
          answer = await response.json();
        } catch (error) {
          // The body stopped coming (the request's time ran out, the connection dropped): not a format problem.
          if (!(error instanceof SyntaxError))
            throw new RemoteError(
              `${this.url} did not finish its answer to ${method} ${path.split("?")[0]} (${describeNetworkError(error)}): try again; if it goes on, is ARBOR_URL the address of an Arbor API?`,
              response.status,
            );
          throw new RemoteError(
            `${this.url} answered ${method} ${path.split("?")[0]} with something that is not JSON: is ARBOR_URL the address of an Arbor API?`,
            response.status,
          );
        }
        const misfit = shape && misfitOf(answer, shape);
        if (misfit)
          throw new RemoteError(
            `${this.url} answered ${method} ${path.split("?")[0]} with JSON that is not an Arbor API's answer (${misfit}): is ARBOR_URL the address of an Arbor API, of this version?`,
            response.status,
          );
        return answer as T;
      }
      if (response.status >= 300 && response.status < 400) {
        const location = printable(response.headers.get("location") ?? "elsewhere");
        throw new RemoteError(
          `${this.url} redirects to ${location}: set ARBOR_URL to where the Arbor API is (no redirect is followed, so the key goes nowhere else)`,
          response.status,
        );
      }
      const problem = await errorOf(response);
      const wait = retryAfterMs(response);
      const retry =
        !last &&
        (response.status === 429 || (repeatable && RETRYABLE.has(response.status))) &&
        (wait ?? 0) <= this.#maxWaitMs;
      if (retry) {
        await this.#sleep(wait ?? backoff(attempt));
        continue;
      }
      throw new RemoteError(
        explain(this.url, method, response.status, problem, wait),
        response.status,
        problem.code,
      );
    }
  }
}

/** A body sent as it is (not as JSON). */
class RawBody {
  readonly bytes: Uint8Array;
  readonly type: string;
  constructor(bytes: Uint8Array, type: string) {
    this.bytes = bytes;
    this.type = type;
  }
}

/** Why `answer` is not of `shape` (its first field that is missing or of another kind), if it is not. */
function misfitOf(answer: unknown, shape: Shape): string | undefined {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) return "not a JSON object";
  for (const [field, kind] of Object.entries(shape)) {
    const value = (answer as Record<string, unknown>)[field];
    const fits =
      kind === "array"
        ? Array.isArray(value)
        : kind === "object"
          ? typeof value === "object" && value !== null && !Array.isArray(value)
          : typeof value === "string";
    if (!fits) return `no ${kind} "${field}"`;
  }
  return undefined;
}

/** 0.5 s, 1 s, 2 s, ... at most 8 s. */
const backoff = (attempt: number) => Math.min(8000, 500 * 2 ** (attempt - 1));

function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get("retry-after");
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

async function errorOf(response: Response): Promise<{ code?: string; message?: string; details?: unknown }> {
  try {
    const body = (await response.json()) as {
      error?: { code?: string; message?: string; details?: unknown };
    };
    return body.error ?? {};
  } catch {
    return {};
  }
}

function explain(
  url: string,
  method: string,
  status: number,
  problem: { code?: string; message?: string },
  waitMs: number | undefined,
): string {
  const said = problem.message ? `: ${printable(String(problem.message))}` : "";
  switch (status) {
    case 401:
      return `Arbor at ${url} does not accept ARBOR_KEY (401)${said}`;
    case 403:
      return `Not allowed (403)${said}`;
    case 404:
      return `Not found (404)${said}`;
    case 429:
      return `Arbor at ${url} is limiting this key's requests (429)${said}; try again in ${Math.ceil((waitMs ?? 1000) / 1000)} s`;
    default:
      if (status >= 500)
        return `Arbor at ${url} failed (${status})${said}${method === "POST" ? "; it was not sent again" : ""}; try again later`;
      return `Arbor at ${url} refused the request (${status})${said}`;
  }
}

function describeNetworkError(cause: unknown): string {
  const error = cause as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (error.name === "TimeoutError") return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  return error.cause?.code ?? error.cause?.message ?? error.message ?? String(cause);
}

/** A page's cursor seen before: the server's paging does not move on, and would be read for ever. */
export function notAgain(remote: Remote, seen: Set<string>, cursor: string, what: string): void {
  if (seen.has(cursor))
    throw new RemoteError(
      `${remote.url} pages ${printable(what)} in a way that does not move on (a cursor it gave before): stopped`,
      200,
    );
  seen.add(cursor);
}

/**
 * An explicit --tenant against a remote Arbor: it acts on ARBOR_KEY's tenant only, so a --tenant
 * that names another is refused before anything is done (an admin of acme who writes --tenant beta
 * means beta, and must not change acme instead, nor be shown acme's as beta's).
 */
export async function checkTenantOption(remote: Remote, tenant: string | undefined): Promise<void> {
  if (tenant === undefined) return;
  const { tenant: own } = await remote.get<{ tenant: string }>("/v1/me", { tenant: "string" });
  if (tenant !== own)
    throw new ValidationError(
      `--tenant ${printable(tenant)}: ARBOR_KEY is a key of tenant ${printable(own)}, and ${remote.url} acts on the key's tenant only. Nothing was done: use a key of ${printable(tenant)}.`,
    );
}

/** `/v1/...` paths with a URN in them: one URL-encoded segment. */
export const enc = encodeURIComponent;
