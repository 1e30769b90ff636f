import { A2A_VERSION_HEADER, AGENT_CARD_PATH, Extensions, HTTP_EXTENSION_HEADER } from "@a2a-js/sdk";
import { A2A_ERROR_CODE, ContentTypeNotSupportedError } from "@a2a-js/sdk/errors";
import { defaultServerCallContextBuilder } from "@a2a-js/sdk/server";
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Engine } from "../../engine/engine.ts";
import { UnavailableError } from "../../kernel/errors.ts";
import { type ArborLogger, componentLogger } from "../../kernel/logger.ts";
import type { NotifyService } from "../../notify/service.ts";
import type { Authenticated, KeyStore } from "../../ports/key-store.ts";
import { AUTH_ERROR_CODE } from "../../protocols/a2a/a2a-mapping.ts";
import { type RateLimiter, throttledMessage } from "../http/rate-limit.ts";
import { sourceAddress } from "../http/source-address.ts";
import {
  A2A_PATH,
  arborAgentCard,
  type CardBody,
  type CardCapabilities,
  type CardVersion,
  cardBody,
  matchesEtag,
} from "./a2a-card.ts";
import { checkA2aRequest } from "./a2a-input.ts";
import { ArborCaller } from "./a2a-store.ts";
import { rpcEventStream } from "./a2a-streams.ts";
import { type A2aTasksOptions, ArborA2aTasks } from "./a2a-tasks.ts";
import {
  A2aJsonRpc,
  errorOf,
  negotiateVersion,
  type RpcResponse,
  rpcError,
  shownError,
  wrongVersion,
} from "./a2a-transport.ts";

export { A2A_PATH, arborAgentCard } from "./a2a-card.ts";

/**
 * Arbor as an A2A agent, 1.0 and 0.3 on one endpoint: another agent (or a person's A2A client)
 * sends it a message, Arbor runs the request, and the answer comes back as the task's artifact. A
 * Hono sub-app with two routes, mounted by `arbor serve` next to the HTTP API:
 *
 *   GET  /.well-known/agent-card.json   the agent card (public: it says how to call, not what was
 *                                       done; 1.0's or 0.3's by A2A-Version, each with its strong
 *                                       ETag, see a2a-card.ts)
 *   POST /a2a (and /a2a/)               JSON-RPC: 1.0 with `A2A-Version: 1.0`, 0.3 without the
 *                                       header (a2a-transport.ts)
 *
 * Every JSON-RPC request names an API key (`Authorization: Bearer <key>`, see api-keys.ts) and is
 * refused with 401 before anything else without a known one; the key's tenant and roles are what
 * the engine then checks every read and write against. Bodies over 256 KB are refused (413),
 * malformed JSON-RPC gets the standard errors (-32700, -32600, -32601, -32602), and a message
 * over the limits every channel keeps (a2a-input.ts) is invalid params (-32602), refused before
 * anything is written.
 */
export const MAX_A2A_BODY_BYTES = 256 * 1024;

export interface A2aAppOptions {
  engine: Engine;
  keys: KeyStore;
  /**
   * Where the app is reachable from outside: the card's interface URL is `<baseUrl>/a2a`. It is
   * configuration (`arbor serve --public-url`, ARBOR_PUBLIC_URL, else the address the server
   * listens on: a function, read when the card is asked for), never anything a request says: the
   * card is cached publicly, so a forged Host header must not end up in it.
   */
  baseUrl: string | (() => string);
  log?: ArborLogger;
  /** Requests per key and per tenant, shared with the HTTP API (see rate-limit.ts); absent: none counted. */
  limiter?: RateLimiter;
  /** How long a blocking SendMessage waits before it answers with the task still working (default 4 min). */
  waitMs?: number;
  /** How often a waiting send reads the state without a wake-up (default 5 s). */
  recheckMs?: number;
  /** Whether the card offers streaming (SSE) methods; served from the request's feed, a2a-streams.ts (default true). */
  streaming?: boolean;
  /** Whether the card offers push notifications; on when `notify` is given. */
  pushNotifications?: boolean;
  /** How streams end (a2a-streams.ts): live (default), or bounded behind API Gateway. */
  streams?: A2aTasksOptions["streams"];
  /** A stream's heartbeat comment after this long without an event (default 15 s). */
  heartbeatMs?: number;
  /** Push notifications (channels/a2a/a2a-push.ts); absent: none (the card says so). */
  notify?: NotifyService;
}

type Env = { Variables: { who: Authenticated } };

/** The media types a JSON-RPC body may be sent as: JSON, and A2A's own JSON type (application/a2a+json). */
const JSON_TYPES = new Set(["application/json", "application/a2a+json"]);

/** The methods answered as event streams, in both versions (a2a-transport.ts names them). */
const STREAM_METHODS = new Set([
  "SendStreamingMessage",
  "SubscribeToTask",
  "message/stream",
  "tasks/resubscribe",
]);

export function createA2aApp(options: A2aAppOptions): Hono<Env> {
  const log = options.log ?? componentLogger("a2a-server");
  const baseUrl = options.baseUrl;
  const base = typeof baseUrl === "string" ? () => baseUrl : baseUrl;
  // The one place the card's capabilities are set: the SDK's handlers refuse what it does not offer.
  const capabilities: CardCapabilities = {
    streaming: options.streaming ?? true,
    pushNotifications: options.pushNotifications ?? options.notify !== undefined,
  };
  // The JSON-RPC side reads only the card's capabilities, bindings and versions, never its URL.
  const card = arborAgentCard("http://localhost", capabilities);
  // The cards as served, per version, made again when the public URL changes (with a new date).
  let cached: { base: string; cards: Record<CardVersion, CardBody>; modified: string } | undefined;
  const publicCard = (version: CardVersion) => {
    const at = base();
    if (cached?.base !== at) {
      const card = arborAgentCard(at, capabilities);
      const now = new Date(Math.floor(options.engine.deps.clock().getTime() / 1000) * 1000);
      cached = {
        base: at,
        cards: { "1.0": cardBody(card, "1.0"), "0.3": cardBody(card, "0.3") },
        modified: now.toUTCString(),
      };
    }
    return { ...cached.cards[version], modified: cached.modified };
  };
  const tasks = new ArborA2aTasks({
    engine: options.engine,
    card,
    publicCard: () => arborAgentCard(base(), capabilities),
    log,
    ...(options.waitMs !== undefined ? { waitMs: options.waitMs } : {}),
    ...(options.recheckMs !== undefined ? { recheckMs: options.recheckMs } : {}),
    ...(options.streams ? { streams: options.streams } : {}),
    ...(options.notify ? { notify: options.notify } : {}),
  });
  const jsonRpc = new A2aJsonRpc(tasks);
  const app = new Hono<Env>();

  app.get(`/${AGENT_CARD_PATH}`, (c) => {
    // The card in the form of the version asked for (a2a-card.ts): none is 0.3, as on /a2a.
    const asked = negotiateVersion(c.req.header(A2A_VERSION_HEADER), c.req.query(A2A_VERSION_HEADER));
    const { body, etag, modified } = publicCard(asked instanceof Error ? "1.0" : asked);
    c.header("Cache-Control", "public, max-age=300");
    c.header("Vary", A2A_VERSION_HEADER);
    c.header("ETag", etag);
    c.header("Last-Modified", modified);
    const ifNoneMatch = c.req.header("if-none-match");
    // RFC 9110 §13.1.3: If-Modified-Since counts only without If-None-Match.
    if (
      ifNoneMatch
        ? matchesEtag(ifNoneMatch, etag)
        : notModifiedSince(c.req.header("if-modified-since"), modified)
    )
      return c.body(null, 304);
    c.header("Content-Type", "application/json");
    return c.body(body);
  });

  app.on(
    "POST",
    [A2A_PATH, `${A2A_PATH}/`],
    // Who calls, before anything is read: no body is parsed for a caller without a key.
    async (c, next) => {
      const authorization = c.req.header("authorization");
      // A client address that keeps sending unknown keys waits, before any key is looked up.
      const source = sourceAddress(c);
      const flooding = options.limiter?.unknownKeysFrom(source);
      if (flooding) {
        c.header("Retry-After", String(flooding.retryAfterSeconds));
        c.header("Connection", "close");
        return c.json(rpcError(null, AUTH_ERROR_CODE, throttledMessage(flooding)), 429);
      }
      let who: Authenticated | undefined;
      try {
        who = await options.keys.authenticate(authorization);
      } catch (error) {
        // The keys file is not valid: nobody is let in until it is (see ApiKeys.refuseAll).
        if (!(error instanceof UnavailableError)) throw error;
        c.header("Connection", "close");
        return c.json(rpcError(null, AUTH_ERROR_CODE, error.message), 503);
      }
      if (!who) {
        options.limiter?.unknownKey(source);
        // RFC 6750: a presented key that is not known is an invalid_token; no key says only the scheme.
        c.header("WWW-Authenticate", `Bearer realm="arbor"${authorization ? ', error="invalid_token"' : ""}`);
        // The body is never read: a client must not send its next request on this connection.
        c.header("Connection", "close");
        return c.json(
          rpcError(
            null,
            AUTH_ERROR_CODE,
            "Unauthenticated: send an Arbor API key as Authorization: Bearer <key> (create one with `arbor keys add`)",
          ),
          401,
        );
      }
      c.set("who", who);
      // Over the key's or the tenant's rate: HTTP 429 with Retry-After, as on the HTTP API, so that
      // any client or proxy knows to wait; the body is a JSON-RPC error (-32000) saying so.
      const throttled = options.limiter?.take(who);
      if (throttled) {
        c.header("Retry-After", String(throttled.retryAfterSeconds));
        c.header("Connection", "close"); // the body is not read
        return c.json(rpcError(null, AUTH_ERROR_CODE, throttledMessage(throttled)), 429);
      }
      await next();
    },
    bodyLimit({
      maxSize: MAX_A2A_BODY_BYTES,
      onError: (c) => {
        c.header("Connection", "close"); // the rest of the body is not read
        return c.json(
          rpcError(
            null,
            A2A_ERROR_CODE.INVALID_REQUEST,
            `The request is larger than ${MAX_A2A_BODY_BYTES} bytes`,
          ),
          413,
        );
      },
    }),
    async (c) => {
      const who = c.get("who");
      const type = c.req.header("content-type");
      if (type && !JSON_TYPES.has(type.split(";", 1)[0]?.trim().toLowerCase() ?? ""))
        return reply(c, {
          jsonrpc: "2.0",
          id: null,
          error: errorOf(
            new ContentTypeNotSupportedError(
              `Unsupported Content-Type "${type}": send application/json (or application/a2a+json)`,
            ),
            "1.0",
          ),
        });
      let body: unknown;
      try {
        body = JSON.parse(await c.req.text());
      } catch {
        return reply(
          c,
          rpcError(null, A2A_ERROR_CODE.PARSE_ERROR, "Parse error: the body is not valid JSON"),
        );
      }
      const problem = invalidRequest(body);
      if (problem)
        return reply(c, rpcError(idOf(body), A2A_ERROR_CODE.INVALID_REQUEST, `Invalid request: ${problem}`));
      const request = body as { id?: string | number | null; method: string };
      const id = request.id ?? null;
      // The version: the header, else the query parameter, else 0.3 (a2a-transport.ts).
      const asked = c.req.header(A2A_VERSION_HEADER);
      const version = negotiateVersion(asked, c.req.query(A2A_VERSION_HEADER));
      if (version instanceof Error) return reply(c, { jsonrpc: "2.0", id, error: errorOf(version, "1.0") });
      c.header(A2A_VERSION_HEADER, version);
      const other = wrongVersion(request.method, version, Boolean(asked ?? c.req.query(A2A_VERSION_HEADER)));
      if (other) return reply(c, rpcError(id, A2A_ERROR_CODE.METHOD_NOT_FOUND, other));
      // The limits every channel keeps, on the request as sent, before the SDK decodes it.
      const refused = checkA2aRequest(body as Record<string, unknown>, who.caller.tenant, version);
      if (refused) return reply(c, { jsonrpc: "2.0", id, error: errorOf(refused, version) });

      const headers: Record<string, string> = {};
      c.req.raw.headers.forEach((value, key) => {
        if (key !== "authorization") headers[key] = value; // the key stays at the edge
      });
      const context = defaultServerCallContextBuilder({
        extensions: Extensions.parseServiceParameter(c.req.header(HTTP_EXTENSION_HEADER)),
        user: new ArborCaller(who),
        headers,
        requestedVersion: version,
      });
      log.debug("A2A request", { method: request.method, version, actor: who.actor.id });
      // A stream holds its place among the key's open streams (the HTTP API's count too) until it ends.
      let close: (() => void) | undefined;
      if (STREAM_METHODS.has(request.method) && options.limiter) {
        const opened = options.limiter.openStream(who);
        if (typeof opened !== "function") {
          c.header("Retry-After", String(opened.retryAfterSeconds));
          return c.json(rpcError(id, AUTH_ERROR_CODE, throttledMessage(opened)), 429);
        }
        close = opened;
      }
      try {
        const out = await jsonRpc.handle(body as Record<string, unknown>, context, version);
        if (context.activatedExtensions?.length)
          c.header(HTTP_EXTENSION_HEADER, Extensions.toServiceParameter(context.activatedExtensions));
        if (Symbol.asyncIterator in out) {
          try {
            const stream = await rpcEventStream(c, out, context, {
              version,
              log,
              bounded: options.streams?.mode === "bounded",
              ...(options.heartbeatMs ? { heartbeatMs: options.heartbeatMs } : {}),
              ...(close ? { onClose: close } : {}),
            });
            close = undefined; // the stream's own now: closed when it ends
            return stream;
          } catch (error) {
            return reply(c, { jsonrpc: "2.0", id, error: errorOf(error, version) }, log);
          }
        }
        return reply(c, out, log);
      } catch (error) {
        return reply(c, { jsonrpc: "2.0", id, error: errorOf(error, version) }, log);
      } finally {
        close?.();
      }
    },
  );
  return app;
}

/**
 * A JSON-RPC answer: 200, as JSON-RPC over HTTP has it, except a refusal by the policy (403) and
 * an internal error (500, its detail in the log, not in the answer).
 */
function reply(c: Context<Env>, response: RpcResponse, log?: ArborLogger): Response {
  const code = (response.error as { code?: unknown } | undefined)?.code;
  if (code === undefined) return c.json(response, 200);
  if (code === A2A_ERROR_CODE.INTERNAL_ERROR) {
    log?.error("A2A request failed", { id: response.id, error: response.error });
    return c.json({ ...response, error: shownError(response.error) }, 500);
  }
  return c.json(response, code === AUTH_ERROR_CODE ? 403 : 200);
}

/** Whether an If-Modified-Since date is at or after `modified` (an HTTP date): the copy is current. */
function notModifiedSince(since: string | undefined, modified: string): boolean {
  if (!since) return false;
  const at = Date.parse(since);
  return Number.isFinite(at) && at >= Date.parse(modified);
}

/** Why a parsed body is no JSON-RPC 2.0 request object (one request: A2A has no batches), or undefined. */
function invalidRequest(body: unknown): string | undefined {
  if (Array.isArray(body)) return "batches are not supported: send one request per call";
  if (typeof body !== "object" || body === null) return "the body must be a JSON-RPC request object";
  const r = body as Record<string, unknown>;
  if (r.jsonrpc !== "2.0") return 'jsonrpc must be "2.0"';
  if (typeof r.method !== "string" || r.method === "") return "method must be a non-empty string";
  if ("id" in r && !(typeof r.id === "string" || Number.isInteger(r.id) || r.id === null))
    return "id must be a string, an integer or null";
  return undefined;
}

function idOf(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === "string" || Number.isInteger(id) ? (id as string | number) : null;
}
