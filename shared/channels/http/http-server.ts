import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { Hono, type MiddlewareHandler } from "hono";
import { componentLogger } from "../../kernel/logger.ts";
import { extractTraceHeaders, inSpan, SpanKind, tracingOn } from "../../kernel/tracing.ts";
import type { AuditLog } from "../../ports/audit-log.ts";
import { createA2aApp } from "../a2a/a2a-server.ts";
import { createConsoleApp } from "../console/console-app.ts";
import { ConsoleSessions } from "../console/sessions.ts";
import { createHttpApi, type HttpApiParts } from "./http-api.ts";
import { errorHandler, notFoundJson } from "./http-kit.ts";

/**
 * The one Hono app a local Arbor serves (`arbor serve`), and the Node server around it.
 *
 * Every channel is a sub-app built from the same parts (the engine, the API keys, a logger) and
 * mounted in `createServerApp`, each under its own paths: the HTTP API (/v1/..., /healthz) and the
 * A2A endpoint (/a2a, /.well-known/agent-card.json), the chat channels (/slack/..., /teams/...),
 * the web console (/console/..., shared/channels/console/).
 *
 * Each sub-app authenticates its own routes (the HTTP API guards /v1/* only, so nothing it does
 * reaches another channel's paths) and keeps its own error mapping (Hono applies a sub-app's
 * onError to the routes it mounts); unknown paths get this app's JSON 404.
 */
export interface ServerAppParts extends HttpApiParts {
  /** Where callers reach the server from outside (see A2aAppOptions.baseUrl). */
  publicUrl: string | (() => string);
  /** How long a blocking A2A send waits before it answers with the task working (A2aAppOptions.waitMs). */
  a2aWaitMs?: number;
  /**
   * The chat channels' routes (Slack under /slack, Teams under /teams: shared/channels/chat/chat-routes.ts),
   * mounted before the HTTP API. Each verifies its own caller (a Slack signature, a Teams token).
   */
  chat?: Hono;
  /** The tool calls' audit log (Runtime.audit): the console's task timelines show it. */
  audit?: AuditLog;
}

export function createServerApp(parts: ServerAppParts): Hono {
  const { publicUrl, a2aWaitMs, chat, audit, ...api } = parts;
  const log = parts.log ?? componentLogger("http-server");
  // The console's sessions, kept in the state store: the HTTP API takes their cookie too.
  const sessions =
    parts.sessions ??
    new ConsoleSessions(parts.engine.deps.state, parts.keys, {
      clock: parts.engine.deps.clock,
      untilDurable: parts.engine.deps.untilDurable,
    });
  const app = new Hono();
  app.use("*", serverSpans);
  if (chat) app.route("/", chat);
  app.route(
    "/",
    createConsoleApp({
      engine: parts.engine,
      keys: parts.keys,
      sessions,
      log,
      ...(parts.limiter ? { limiter: parts.limiter } : {}),
      ...(parts.notify ? { notify: parts.notify } : {}),
      ...(audit ? { audit } : {}),
    }),
  );
  app.route("/", createHttpApi({ ...api, sessions, log }));
  // One limiter for both: a key's requests count the same on every channel.
  app.route(
    "/",
    createA2aApp({
      engine: parts.engine,
      keys: parts.keys,
      baseUrl: publicUrl,
      ...(parts.limiter ? { limiter: parts.limiter } : {}),
      ...(a2aWaitMs !== undefined ? { waitMs: a2aWaitMs } : {}),
      // A2A streams end as the HTTP API's event streams do (bounded behind API Gateway).
      ...(parts.events ? { streams: parts.events, heartbeatMs: parts.events.heartbeatMs } : {}),
      ...(parts.notify ? { notify: parts.notify } : {}),
    }),
  );
  // Mount further channels here (see above).
  app.notFound(notFoundJson);
  app.onError(errorHandler(log));
  return app;
}

/**
 * A SERVER span per request, while tracing is on: a child of the caller's `traceparent` when it
 * sends one, named by its route once the route has run; everything the request causes (its plan,
 * tasks, model and tool calls, deliveries) is in its trace.
 */
const serverSpans: MiddlewareHandler = async (c, next) => {
  if (!tracingOn()) return next();
  const parent = extractTraceHeaders((name) => c.req.header(name));
  await inSpan(
    c.req.method,
    {
      kind: SpanKind.SERVER,
      parent,
      attributes: { "http.request.method": c.req.method, "url.path": new URL(c.req.url).pathname },
    },
    async (span) => {
      await next();
      const route = c.req.routePath;
      if (route && route !== "*" && route !== "/*") {
        span.rename(`${c.req.method} ${route}`);
        span.set("http.route", route);
      }
      span.set("http.response.status_code", c.res.status);
      if (c.res.status >= 500) span.fail(String(c.res.status));
    },
  );
};

export interface RunningServer {
  /** Where it listens, e.g. http://127.0.0.1:8787 (the actual port when 0 was asked for). */
  url: string;
  /** Stops accepting connections, lets requests in flight finish, and resolves once it is closed. */
  close(): Promise<void>;
}

/**
 * What one server holds at once: connections (past the cap a new one is closed at once, by Node;
 * event streams are bounded per key and tenant besides), and how long a client may take to send
 * its request's headers (a client that opens connections and dribbles nothing holds none for long).
 */
export const SERVER_LIMITS = { maxConnections: 1_000, headersTimeoutMs: 10_000, requestTimeoutMs: 60_000 };

/** Serves `app` on @hono/node-server; rejects when it cannot listen (the port is taken, say). */
export function startServer(
  app: { fetch: (request: Request, env?: unknown) => Response | Promise<Response> },
  options: { port: number; host: string; limits?: Partial<typeof SERVER_LIMITS> },
): Promise<RunningServer> {
  const limits = { ...SERVER_LIMITS, ...options.limits };
  return new Promise((resolve, reject) => {
    const server = serve(
      {
        fetch: app.fetch,
        port: options.port,
        hostname: options.host,
        serverOptions: {
          headersTimeout: limits.headersTimeoutMs,
          // Receiving the whole request (an answer streams out for as long as it takes).
          requestTimeout: limits.requestTimeoutMs,
          // How often Node looks for connections past those timeouts (its default is 30 s).
          connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
        },
      },
      (info) => {
        server.off("error", reject);
        const host = options.host.includes(":") ? `[${options.host}]` : options.host;
        resolve({ url: `http://${host}:${info.port}`, close: () => closeServer(server as Server) });
      },
    );
    (server as Server).maxConnections = limits.maxConnections;
    server.once("error", reject);
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeIdleConnections(); // keep-alive connections would hold close() open
    // A request still running after a few seconds is cut off.
    setTimeout(() => server.closeAllConnections(), 5000).unref();
  });
}
