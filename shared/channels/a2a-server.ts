import {
  A2A_VERSION_HEADER,
  AGENT_CARD_PATH,
  AgentCard,
  Extensions,
  HTTP_EXTENSION_HEADER,
} from "@a2a-js/sdk";
import { A2A_ERROR_CODE, ContentTypeNotSupportedError } from "@a2a-js/sdk/errors";
import {
  defaultServerCallContextBuilder,
  JsonRpcTransportHandler,
  validateVersion,
} from "@a2a-js/sdk/server";
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import pkg from "../../package.json" with { type: "json" };
import type { Engine } from "../engine/engine.ts";
import { UnavailableError } from "../errors.ts";
import type { NotifyService } from "../notify/service.ts";
import { type ArborLogger, componentLogger } from "../observability/logger.ts";
import type { Authenticated, KeyStore } from "../ports/key-store.ts";
import { checkA2aRequest } from "./a2a-input.ts";
import { AUTH_ERROR_CODE } from "./a2a-mapping.ts";
import { ArborCaller } from "./a2a-store.ts";
import { ArborA2aTasks } from "./a2a-tasks.ts";
import { type RateLimiter, throttledMessage } from "./rate-limit.ts";

/**
 * Arbor as an A2A 1.0 agent: another agent (or a person's A2A client) sends it a message, Arbor
 * runs the request, and the answer comes back as the task's artifact. A Hono sub-app with two
 * routes, mounted by `arbor serve` next to the HTTP API:
 *
 *   GET  /.well-known/agent-card.json   the agent card (public: it says how to call, not what was done)
 *   POST /a2a                           JSON-RPC (SendMessage, GetTask, CancelTask, ListTasks)
 *
 * Every JSON-RPC request names an API key (`Authorization: Bearer <key>`, see api-keys.ts) and is
 * refused with 401 before anything else without a known one; the key's tenant and roles are what
 * the engine then checks every read and write against. Bodies over 256 KB are refused (413),
 * malformed JSON-RPC gets the standard errors (-32700, -32600, -32601, -32602), and a message
 * over the limits every channel keeps (a2a-input.ts) is invalid params (-32602), refused before
 * anything is written.
 */
export const A2A_PATH = "/a2a";
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
  /** Push notifications (channels/a2a-push.ts); absent: none (the card says so). */
  notify?: NotifyService;
}

/** The agent card: what Arbor does, where to call it, and that it wants a bearer key. */
export function arborAgentCard(baseUrl: string, options: { pushNotifications?: boolean } = {}): AgentCard {
  const base = baseUrl.replace(/\/+$/, "");
  return {
    name: "Arbor",
    description:
      "Runs a request with a team of LLM agents: plans it as a tree of tasks, gives every task to the " +
      "assistant that fits it best, checks each result against the task's definition of done, and asks " +
      "a person before a risky action.",
    supportedInterfaces: [
      { url: `${base}${A2A_PATH}`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    ],
    provider: undefined,
    version: pkg.version,
    capabilities: {
      streaming: false,
      pushNotifications: options.pushNotifications === true,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {
      arborApiKey: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: {
            description:
              "An Arbor API key (`arbor keys add --kind agent`), sent as Authorization: Bearer <key>",
            scheme: "Bearer",
            bearerFormat: "",
          },
        },
      },
    },
    securityRequirements: [{ schemes: { arborApiKey: { list: [] } } }],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain"],
    skills: [
      {
        id: "run_request",
        name: "Run a request with a team of agents",
        description:
          "Takes a request in plain language and carries it out: planning, delegation to specialised " +
          "assistants and their tools, and a checked answer. When an action needs a person's approval " +
          "the task becomes input-required; answer it with a message on the same task.",
        tags: ["planning", "delegation", "multi-agent"],
        examples: [
          "Plan a two-day team offsite in Lisbon for 12 people in June, with a budget per person",
          "Compute the cost per person of a 1,200 EUR budget shared by 12 people",
        ],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

type Env = { Variables: { who: Authenticated } };

export function createA2aApp(options: A2aAppOptions): Hono<Env> {
  const log = options.log ?? componentLogger("a2a-server");
  const baseUrl = options.baseUrl;
  const base = typeof baseUrl === "string" ? () => baseUrl : baseUrl;
  // The JSON-RPC side reads only the card's protocol bindings and versions, never its URL.
  const push = { pushNotifications: options.notify !== undefined };
  const card = arborAgentCard("http://localhost", push);
  let cached: { base: string; json: Record<string, unknown> } | undefined;
  const cardJson = () => {
    const at = base();
    if (cached?.base !== at)
      cached = { base: at, json: AgentCard.toJSON(arborAgentCard(at, push)) as Record<string, unknown> };
    return cached.json;
  };
  const tasks = new ArborA2aTasks({
    engine: options.engine,
    card,
    log,
    ...(options.waitMs !== undefined ? { waitMs: options.waitMs } : {}),
    ...(options.recheckMs !== undefined ? { recheckMs: options.recheckMs } : {}),
    ...(options.notify ? { notify: options.notify } : {}),
  });
  const jsonRpc = new JsonRpcTransportHandler(tasks);
  const app = new Hono<Env>();

  app.get(`/${AGENT_CARD_PATH}`, (c) => {
    c.header("Cache-Control", "public, max-age=300");
    return c.json(cardJson());
  });

  app.post(
    A2A_PATH,
    // Who calls, before anything is read: no body is parsed for a caller without a key.
    async (c, next) => {
      const authorization = c.req.header("authorization");
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
      if (type && type.split(";", 1)[0]?.trim().toLowerCase() !== "application/json")
        return reply(c, {
          jsonrpc: "2.0",
          id: null,
          error: JsonRpcTransportHandler.mapToJSONRPCError(
            new ContentTypeNotSupportedError(`Unsupported Content-Type "${type}": send application/json`),
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
      // The limits every channel keeps, on the request as sent, before the SDK decodes it.
      const refused = checkA2aRequest(body as Record<string, unknown>, who.caller.tenant);
      if (refused)
        return reply(c, {
          jsonrpc: "2.0",
          id: request.id ?? null,
          error: JsonRpcTransportHandler.mapToJSONRPCError(refused),
        });

      const version = c.req.header(A2A_VERSION_HEADER);
      const headers: Record<string, string> = {};
      c.req.raw.headers.forEach((value, key) => {
        if (key !== "authorization") headers[key] = value; // the key stays at the edge
      });
      const context = defaultServerCallContextBuilder({
        extensions: Extensions.parseServiceParameter(c.req.header(HTTP_EXTENSION_HEADER)),
        user: new ArborCaller(who),
        headers,
        ...(version ? { requestedVersion: version } : {}),
      });
      const id = request.id ?? null;
      log.debug("A2A request", { method: request.method, actor: who.actor.id });
      try {
        validateVersion(context.requestedVersion, card, "JSONRPC");
        const out = await jsonRpc.handle(body as Record<string, unknown>, context);
        if (context.activatedExtensions?.length)
          c.header(HTTP_EXTENSION_HEADER, Extensions.toServiceParameter(context.activatedExtensions));
        if (Symbol.asyncIterator in out) {
          // Streaming is off in the card: the SDK refuses it on the first read.
          const stream = out[Symbol.asyncIterator]();
          try {
            await stream.next();
          } catch (error) {
            return reply(c, { jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) });
          } finally {
            await stream.return?.(undefined);
          }
          return reply(c, rpcError(id, A2A_ERROR_CODE.UNSUPPORTED_OPERATION, "Streaming is not supported"));
        }
        return reply(c, out, log);
      } catch (error) {
        return reply(c, { jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) }, log);
      }
    },
  );
  return app;
}

/** A JSON-RPC response as the SDK's transport returns it. */
interface RpcResponse {
  jsonrpc: string;
  id: string | number | null;
  result?: unknown;
  error?: unknown;
}

const rpcError = (id: string | number | null, code: number, message: string): RpcResponse => ({
  jsonrpc: "2.0",
  id,
  error: { code, message },
});

/**
 * A JSON-RPC answer: 200, as JSON-RPC over HTTP has it, except a refusal by the policy (403) and
 * an internal error (500, its detail in the log, not in the answer).
 */
function reply(c: Context<Env>, response: RpcResponse, log?: ArborLogger): Response {
  const code = (response.error as { code?: unknown } | undefined)?.code;
  if (code === undefined) return c.json(response, 200);
  if (code === A2A_ERROR_CODE.INTERNAL_ERROR) {
    log?.error("A2A request failed", { id: response.id, error: response.error });
    return c.json(rpcError(response.id, code, "Internal error: see the Arbor server's log"), 500);
  }
  return c.json(response, code === AUTH_ERROR_CODE ? 403 : 200);
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
