import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { componentLogger } from "../observability/logger.ts";
import { createA2aApp } from "./a2a-server.ts";
import { createHttpApi, errorHandler, type HttpApiParts, notFoundJson } from "./http-api.ts";

/**
 * The one Hono app a local Arbor serves (`arbor serve`), and the Node server around it.
 *
 * Every channel is a sub-app built from the same parts (the engine, the API keys, a logger) and
 * mounted in `createServerApp`, each under its own paths: the HTTP API (/v1/..., /healthz) and the
 * A2A endpoint (/a2a, /.well-known/agent-card.json), the chat channels (/slack/..., /teams/...).
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
   * The chat channels' routes (Slack under /slack, Teams under /teams: shared/channels/chat-routes.ts),
   * mounted before the HTTP API. Each verifies its own caller (a Slack signature, a Teams token).
   */
  chat?: Hono;
}

export function createServerApp(parts: ServerAppParts): Hono {
  const { publicUrl, a2aWaitMs, chat, ...api } = parts;
  const log = parts.log ?? componentLogger("http-server");
  const app = new Hono();
  if (chat) app.route("/", chat);
  app.route("/", createHttpApi({ ...api, log }));
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

export interface RunningServer {
  /** Where it listens, e.g. http://127.0.0.1:8787 (the actual port when 0 was asked for). */
  url: string;
  /** Stops accepting connections, lets requests in flight finish, and resolves once it is closed. */
  close(): Promise<void>;
}

/** Serves `app` on @hono/node-server; rejects when it cannot listen (the port is taken, say). */
export function startServer(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  options: { port: number; host: string },
): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port: options.port, hostname: options.host }, (info) => {
      server.off("error", reject);
      const host = options.host.includes(":") ? `[${options.host}]` : options.host;
      resolve({ url: `http://${host}:${info.port}`, close: () => closeServer(server as Server) });
    });
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
