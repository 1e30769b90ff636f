import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import type { Hono } from "hono";
import { type APIGatewayProxyResult, handle, type LambdaEvent } from "hono/aws-lambda";
import { chatRoutes } from "../shared/channels/chat/chat-routes.ts";
import type { EventStreamOptions } from "../shared/channels/http/http-events.ts";
import { createServerApp } from "../shared/channels/http/http-server.ts";
import { CachedKeyStore } from "../shared/channels/http/key-cache.ts";
import { RateLimiter } from "../shared/channels/http/rate-limit.ts";
import { ConfigError } from "../shared/kernel/errors.ts";
import { componentLogger } from "../shared/kernel/logger.ts";
import { createGuardedFetch } from "../shared/outbound/guard.ts";
import { outboundPolicy } from "../shared/outbound/policy.ts";
import type { KeyStore } from "../shared/ports/key-store.ts";
import type { AwsRuntime } from "../shared/runtime/aws/aws.ts";
import { createAwsApiEngine } from "../shared/runtime/aws/aws-api-engine.ts";
import { type AwsChat, awsChatSettings } from "../shared/runtime/aws/aws-chat.ts";
import { type AwsNotify, awsNotify } from "../shared/runtime/aws/aws-notify.ts";
import { stateKeyStore } from "../shared/runtime/key-stores.ts";
import { coldStart, type FunctionDeps, type LambdaContext, traced } from "./cold-start.ts";

/**
 * The API function: API Gateway's HTTP API (payload format 2.0) in front of the same Hono app
 * `arbor serve` runs (shared/channels/http/http-server.ts): the HTTP API under /v1 (admin routes
 * included), A2A at /a2a, the agent card, /healthz. One app, two runtimes.
 *
 * Built once per cold start: the AWS runtime, an engine with the entry points only (no model, no
 * tools, no steps: see aws-api-engine.ts), API keys from the state table behind a short cache
 * (a key revoked elsewhere stops within the TTL, 30 s by default), and the app. The agent card
 * names ARBOR_PUBLIC_URL (the stack sets the API's endpoint), never a request's Host. A blocking
 * A2A send waits ARBOR_A2A_BLOCKING_WAIT_MS at most (the stack sets 25 s, under API Gateway's
 * 30 s), then answers with the task working and the caller polls GetTask.
 *
 * Webhooks (`callbackUrl`, A2A push configs, the deliveries' admin routes) run on the notify path
 * (shared/runtime/aws/aws-notify.ts): what this function records (a subscription's first notification,
 * a redrive) is queued on the delivery queue (ARBOR_NOTIFY_QUEUE_URL) before the response is
 * returned; the notify function sends it.
 *
 * Slack and Teams (shared/channels/chat/chat-routes.ts: /slack/..., /teams/...) when the stack has the
 * chat secret (ARBOR_CHAT_SECRET_ARN, from -c chatSecret): their settings are read from it and kept
 * five minutes. Each request is verified (Slack's signature, Teams' token), recorded, and answered
 * at once; the work runs on the engine's functions and the replies come from the notify function.
 * Without the secret these routes are not mounted (nor routed by API Gateway).
 */
/** An HTTP API event, payload format 2.0. */
export type APIGatewayProxyEventV2 = Extract<LambdaEvent, { routeKey: string; rawPath: string }>;

export interface ApiDeps extends FunctionDeps {
  /** Milliseconds, for the key cache and the rate limits (tests move it on). */
  now?: () => number;
  /** How long a key's answer is kept (default DEFAULT_KEY_CACHE_TTL_MS, 30 s). */
  keyCacheTtlMs?: number;
  /** Event streams' waits (always bounded here; tests shorten them). */
  eventStreams?: Omit<EventStreamOptions, "mode">;
  /** The chat secret's client (default: one for ARBOR_SECRETSMANAGER_ENDPOINT or the region). */
  secretsManager?: SecretsManagerClient;
  /** What the chat routes fetch themselves (the Teams signing keys); default the outbound guard's. */
  chatFetch?: typeof fetch;
  /** The chat routes' clock (Slack's signature window, token expiry; tests move it). */
  clock?: () => Date;
}

export type ApiHandler = ((
  event: APIGatewayProxyEventV2,
  context?: LambdaContext,
) => Promise<APIGatewayProxyResult>) & {
  close(): Promise<void>;
};

const log = componentLogger("api");

export function createApiHandler(deps: ApiDeps = {}): ApiHandler {
  let lambda: ((event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyResult>) | undefined;
  let notify: AwsNotify | undefined;
  let chat: AwsChat | undefined;
  const instance = coldStart(
    deps,
    ({ config, rt, engine }) => {
      notify = awsNotify(engine.deps, config, deps.sqs ? { sqs: deps.sqs } : {});
      notify.queued?.queueRecorded();
      if (!config.publicUrl)
        throw new ConfigError(
          "The API function names its public URL in the agent card: set ARBOR_PUBLIC_URL to the API's endpoint (the engine stack does)",
        );
      const keys: KeyStore = new CachedKeyStore(stateKeyStore(rt.state), {
        ...(deps.now ? { now: deps.now } : {}),
        ...(deps.keyCacheTtlMs !== undefined ? { ttlMs: deps.keyCacheTtlMs } : {}),
      });
      chat = awsChatSettings(config, {
        ...(deps.secretsManager ? { client: deps.secretsManager } : {}),
        ...(deps.now ? { now: deps.now } : {}),
      });
      const app: Hono = createServerApp({
        engine,
        keys,
        publicUrl: config.publicUrl,
        log,
        unwritable: () => storageProblem(rt),
        audit: rt.audit, // the console's timelines
        // Per key and per tenant, in this instance (API Gateway's stage throttling is in front).
        limiter: new RateLimiter(config.rateLimits ?? {}, deps.now),
        ...(config.a2aBlockingWaitMs !== undefined ? { a2aWaitMs: config.a2aBlockingWaitMs } : {}),
        // API Gateway's HTTP API buffers a whole response (30 s at most): event streams answer in
        // rounds, and an EventSource reconnects with Last-Event-ID (http-events.ts).
        // A reconcile of a large running tree costs two requests per open task: every 5 s, not 2.
        events: { mode: "bounded", recheckMs: 5_000, ...(deps.eventStreams ?? {}) },
        notify: notify.service,
        ...(chat
          ? {
              chat: chatRoutes({
                engine,
                notify: notify.service,
                settings: chat.settings,
                fetch: deps.chatFetch ?? createGuardedFetch(outboundPolicy(config.outbound)),
                ...(deps.clock ? { clock: deps.clock } : {}),
              }),
            }
          : {}),
      });
      lambda = handle(app);
    },
    createAwsApiEngine,
  );
  // Each request is in API Gateway's access log; the app logs what fails (with hono's request id).
  const handler = async (event: APIGatewayProxyEventV2, _context?: LambdaContext) => {
    const { rt } = await instance.get();
    // The server span (http-server.ts) is sent with the response: a frozen instance sends nothing.
    return traced(async () => {
      try {
        return await (lambda as NonNullable<typeof lambda>)(withEncodedUrn(event));
      } finally {
        // A frozen instance sends nothing: what the request recorded is queued, and the notices of
        // what it wrote published, before it returns (a notice that failed is logged: the bus is
        // not the record, and the request's writes are done).
        await notify?.queued?.settled();
        await rt.resources.settled().catch((error: unknown) =>
          log.warn("resource notices of a request could not be published", {
            error: error instanceof Error ? error : String(error),
          }),
        );
      }
    });
  };
  return Object.assign(handler, {
    close: async () => {
      notify?.close();
      chat?.close();
      await instance.close();
    },
  });
}

/** The Lambda entry point; configured by the environment the engine stack sets. */
export const handler = createApiHandler();

/**
 * Why the API cannot take work now (the state table or the resources bucket does not answer), or
 * undefined when both do: what /healthz reports. One read of each, of keys that need not exist.
 */
async function storageProblem(rt: AwsRuntime): Promise<string | undefined> {
  const checks = [
    ["state table", () => rt.state.get("health#probe")],
    ["resources bucket", () => rt.objects.get("health-probe.json")],
  ] as const;
  for (const [what, check] of checks) {
    try {
      await check();
    } catch (error) {
      log.error("health check failed", { what, error: error as Error });
      return `The ${what} does not answer; try again shortly`;
    }
  }
  return undefined;
}

/** One element of a URN (package.Type.id), as shared/domain/urn.ts parses them. */
const URN_ELEMENT = /^[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9]*\.[A-Za-z0-9_-]{1,128}$/;

/**
 * API Gateway's HTTP API hands the function the path decoded (`rawPath`): a URN sent as one
 * encoded segment (`/v1/tasks/cld%3Acommon.Tenant.acme%2F...`) arrives as several
 * (`/v1/tasks/cld:common.Tenant.acme/...`). The routes take a URN as one segment, so the segments
 * that make up a URN (from `cld:` on, while they are URN elements) are joined and encoded again.
 * What a caller sent encoded that is never literal in an encoded path (`?`, `#`, a bare `%`,
 * spaces, controls, non-ASCII) is encoded again too: pasted into a URL as it is, a decoded `?` or
 * `#` would cut the path short (DELETE /v1/admin/keys/user_bob%23x would revoke user_bob), and a
 * `..` segment would step up to another route (see escapeSegment).
 * A path that came encoded (a function URL, a test) has neither and is left as it is.
 */
export function withEncodedUrn(event: APIGatewayProxyEventV2): APIGatewayProxyEventV2 {
  const parts = event.rawPath.split("/");
  const start = parts.findIndex((p) => /^cld:[a-z]/.test(p));
  let end = start + 1;
  if (start >= 0) while (end < parts.length && URN_ELEMENT.test(parts[end] as string)) end++;
  const rawPath =
    start < 0
      ? parts.map(escapeSegment).join("/")
      : [
          ...parts.slice(0, start).map(escapeSegment),
          encodeURIComponent(parts.slice(start, end).join("/")),
          ...parts.slice(end).map(escapeSegment),
        ].join("/");
  return rawPath === event.rawPath ? event : { ...event, rawPath };
}

/**
 * One segment of a decoded path, made safe to paste into a URL. A `.` or `..` segment came encoded
 * (a client sends none literally): left as it is, the URL would step up a level and reach another
 * route (`/v1/tasks/<urn>/../../admin/keys/user_bob`); it is kept a name, which no route takes.
 */
function escapeSegment(segment: string): string {
  if (segment === "." || segment === "..") return segment.replaceAll(".", "%252E");
  return escapeDecoded(segment);
}

/** What a decoded path holds that an encoded one never does literally: ?, #, a bare %, spaces, controls, non-ASCII. */
const NEVER_LITERAL = /%(?![0-9A-Fa-f]{2})|[^\x21\x22\x24\x26-\x3e\x40-\x7e%]/gu;

function escapeDecoded(path: string): string {
  return path.replace(NEVER_LITERAL, (ch) => {
    try {
      return encodeURIComponent(ch);
    } catch {
      return "%EF%BF%BD"; // a lone surrogate: the replacement character
    }
  });
}
