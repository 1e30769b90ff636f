import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import * as z from "zod";
import { MAX_REQUEST_CHARS } from "../../domain/input-limits.ts";
import { formatIssues, type InteractionResource, InteractionResponseSchema } from "../../domain/resources.ts";
import { isTerminal } from "../../domain/task-state.ts";
import { isUrn, parentUrn } from "../../domain/urn.ts";
import type { Engine } from "../../engine/engine.ts";
import { DEFAULT_TREE_TASKS, MAX_TREE_TASKS, type TreeNode } from "../../engine/task-tree.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import { questionOf } from "../../notify/chat/snapshot.ts";
import type { NotifyService } from "../../notify/service.ts";
import { callbackSubscriptionId } from "../../notify/subscriptions.ts";
import type { Authenticated, KeyStore } from "../../ports/key-store.ts";
import { csrfRefusal, sessionToken } from "../console/session-cookie.ts";
import type { ConsoleSessions } from "../console/sessions.ts";
import { adminKeyRoutes } from "./admin-keys.ts";
import { a2aCallbackRoutes } from "./http-a2a-callbacks.ts";
import { createArtifactRoutes } from "./http-artifacts.ts";
import { createConversationRoutes } from "./http-conversation.ts";
import { createDocumentRoutes } from "./http-documents.ts";
import { createEvalRoutes } from "./http-evals.ts";
import type { EventStreamOptions } from "./http-events.ts";
import { createGraphRoutes } from "./http-graph.ts";
import {
  type ApiEnv,
  asker,
  errorBody,
  errorHandler,
  type HttpApiLog,
  notFoundJson,
  ownUrn,
  readJson,
  taskPath,
} from "./http-kit.ts";
import { createMemoryRoutes } from "./http-memories.ts";
import { notifyRoutes } from "./http-notify.ts";
import { createReadRoutes } from "./http-reads.ts";
import { resourceEventRoutes } from "./http-resource-events.ts";
import { createSearchRoutes } from "./http-search.ts";
import { createTeamRoutes } from "./http-team.ts";
import { createToolRoutes } from "./http-tools.ts";
import { type RateLimiter, throttledMessage } from "./rate-limit.ts";
import { sourceAddress } from "./source-address.ts";

/**
 * Arbor's HTTP API (local mode: `arbor serve`). Every route under /v1 needs an API key
 * (`Authorization: Bearer <key>`), or the console's session cookie, which stands for the key it
 * was signed in with (and, for a change, the session's CSRF token: console/session-cookie.ts); the
 * key says who calls, of which tenant, with which roles, and the request never chooses its own tenant. Each route parses its input (zod, strict), calls one
 * engine entry point with that caller (the engine checks tenant boundary and policy before it
 * reads or writes anything), and maps the result; errors map to statuses in one place (below).
 *
 *   POST /v1/messages                      {text, conversationUrn?, mode?, title?, callbackUrl?} -> 202
 *                                          (Idempotency-Key header: a retry returns the same 202, writes nothing new)
 *                                          (callbackUrl: signed webhooks as the request moves, http-notify.ts)
 *   GET  /v1/tasks/:urn                    the task's view and output               -> 200
 *   GET  /v1/tasks/:urn/interactions       questions waiting below the task         -> 200
 *   GET  /v1/tasks/:urn/tree?maxTasks=N    the task's tree (status, assistant, usage,
 *                                          questions), breadth first, at most N tasks -> 200
 *   POST /v1/tasks/:urn/cancel             {reason?}                                -> 202
 *   POST /v1/interactions/:urn/answer      {selectedOptionId?, inputValue?, comment?} -> 204
 *   POST /v1/tasks/:urn/conversation/truncate {keepLast} | .../clear   a leaf's window mark (http-conversation.ts) -> 200
 *   GET  /v1/resources/:urn                one resource                             -> 200
 *   GET  /v1/resources/:urn/children       one level below it, paginated            -> 200
 *   GET  /v1/tasks/:urn/events             a task's event stream, paginated (JSON)  -> 200
 *                                          or, Accept: text/event-stream, its tree's
 *                                          events as SSE, resumable (http-events.ts) -> 200
 *   GET  /v1/resource-events?prefix=<urn>  resource writes at/below the URN, as SSE
 *                                          (http-resource-events.ts; 501 on the API function) -> 200
 *   GET  /v1/admin/team                    the tenant's team (admins)               -> 200
 *   PUT  /v1/admin/team?dryRun=true        a team file: its diff, applied unless dry -> 200
 *   GET  /v1/graph?s=&p=&o=                the tenant's graph, one pattern (http-graph.ts) -> 200
 *   GET  /v1/evals/experiments[/:id]       the tenant's experiments (http-evals.ts, admins) -> 200
 *   GET  /healthz                          no key needed: 200 (status ok, or degraded when the
 *                                          model cannot be used), or 503 when Arbor cannot write
 *   /v1/admin/keys                         a tenant's API keys, for its admins (admin-keys.ts)
 *   /v1/callbacks/secret, /v1/admin/callbacks/secret/rotate, /v1/admin/deliveries...
 *                                          webhooks' secret and dead letters (http-notify.ts)
 *
 * URNs are single path segments, URL-encoded (encodeURIComponent). A URN outside the caller's
 * tenant is answered as one that does not exist (404), whatever is there and whatever the body.
 */
export const MAX_BODY_BYTES = 256 * 1024;

export interface HttpApiParts {
  engine: Engine;
  /** Who may call (the keys file locally, the state table on AWS); the admin routes write to it. */
  keys: KeyStore;
  log?: HttpApiLog;
  /** Requests per key and per tenant (see rate-limit.ts); absent: none counted. `arbor serve` always sets it. */
  limiter?: RateLimiter;
  /** Why Arbor cannot write now, or undefined when it can (Runtime.unwritable): /healthz says so. */
  unwritable?: () => Promise<string | undefined>;
  /** How `GET /v1/tasks/:urn/events` streams (http-events.ts): live locally, bounded behind API Gateway. */
  events?: EventStreamOptions;
  /** Webhook deliveries (shared/notify/): `callbackUrl`, the callback secret and the deliveries' admin routes. */
  notify?: NotifyService;
  /**
   * The console's sessions (shared/channels/console/): a request with the session's cookie and no
   * key is the session's principal, as if it had sent the key (changes need the CSRF token too).
   */
  sessions?: ConsoleSessions;
}

const MessageSchema = z
  .object({
    text: z.string().min(1).max(MAX_REQUEST_CHARS),
    conversationUrn: z.string().min(1).max(1000).optional(),
    mode: z.enum(["eager", "lazy"]).optional(),
    title: z.string().min(1).max(200).optional(),
    callbackUrl: z.string().min(1).max(2048).optional(),
  })
  .strict();
const AnswerSchema = InteractionResponseSchema.strict();
const TreeQuerySchema = z
  .object({ maxTasks: z.coerce.number().int().min(1).max(MAX_TREE_TASKS).default(DEFAULT_TREE_TASKS) })
  .strict();
const CancelSchema = z.object({ reason: z.string().min(1).max(1000).optional() }).strict();

const KEY_HELP =
  "Create a key with `npx arbor keys add --id user_<your-name>` (it is printed once) and send it as `Authorization: Bearer <key>`.";

const answerPath = (urn: string) => `/v1/interactions/${encodeURIComponent(urn)}/answer`;

export function createHttpApi({
  engine,
  keys,
  log = componentLogger("http-api"),
  limiter,
  unwritable,
  events,
  notify,
  sessions,
}: HttpApiParts): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();

  // Healthy means able to take work: a server whose every write fails is not. A model that cannot
  // be used leaves it degraded (200: it still takes requests, and fails them saying why): what the
  // engine's calls last found, else a bounded and cached probe (engine/model-health.ts).
  app.get("/healthz", async (c) => {
    const [reason, model] = await Promise.all([unwritable?.(), engine.modelStatus()]);
    if (reason === undefined)
      return c.json({
        status: model.status === "unreachable" || model.status === "failing" ? "degraded" : "ok",
        model,
      });
    c.header("Retry-After", "30");
    return c.json({ status: "unavailable", ...errorBody("UNAVAILABLE", reason), model }, 503);
  });

  // A remote agent's pushes for the a2a tool's calls: their own token, not an API key (first, so
  // the key check below never sees them).
  app.route("/", a2aCallbackRoutes(engine));
  app.use("/v1/*", requestId());
  // Who calls: before anything is read, parsed or written.
  app.use("/v1/*", async (c, next) => {
    const header = c.req.header("authorization");
    // A client address that keeps sending unknown keys waits, before any key is looked up.
    const source = sourceAddress(c);
    const flooding = limiter?.unknownKeysFrom(source);
    if (flooding) {
      c.header("Retry-After", String(flooding.retryAfterSeconds));
      return c.json(errorBody("THROTTLED", throttledMessage(flooding), { scope: flooding.scope }), 429);
    }
    // A console session (its cookie) when no key is sent; a change made with it needs its CSRF token.
    let who: Authenticated | undefined;
    if (header === undefined && sessions) {
      const session = await sessions.check(sessionToken(c));
      if (session) {
        const refused = csrfRefusal(c, session);
        if (refused) return c.json(errorBody("FORBIDDEN", refused), 403);
        who = session.who;
      }
    }
    who ??= await keys.authenticate(header);
    if (!who) {
      limiter?.unknownKey(source);
      c.header(
        "WWW-Authenticate",
        header ? 'Bearer realm="arbor", error="invalid_token"' : 'Bearer realm="arbor"',
      );
      const problem = header ? "That API key is not known here." : "This needs an API key.";
      return c.json(errorBody("UNAUTHENTICATED", `${problem} ${KEY_HELP}`), 401);
    }
    c.set("who", who);
    // How much: a key over its rate, or its tenant over its own, waits (before the body is read).
    const throttled = limiter?.take(who);
    if (throttled) {
      c.header("Retry-After", String(throttled.retryAfterSeconds));
      return c.json(errorBody("THROTTLED", throttledMessage(throttled), { scope: throttled.scope }), 429);
    }
    await next();
  });
  const generalLimit = bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => {
      // The rest of the body is not read: the connection cannot carry another request.
      c.header("Connection", "close");
      return c.json(errorBody("TOO_LARGE", `The request body is larger than ${MAX_BODY_BYTES} bytes`), 413);
    },
  });
  // A document's bytes have their own, larger bound (http-documents.ts).
  app.use("/v1/*", (c, next) =>
    c.req.method === "POST" && c.req.path === "/v1/documents" ? next() : generalLimit(c, next),
  );

  app.post("/v1/messages", async (c) => {
    const { actor, caller } = c.get("who");
    // A conversation outside the caller's tenant is not found, before the rest of the body is checked.
    const req = await readJson(c, MessageSchema, (raw) => {
      const urn = (raw as { conversationUrn?: unknown } | null)?.conversationUrn;
      if (typeof urn !== "string") return;
      // Not a URN at all is the request's mistake (400); a URN of another tenant is not found (404).
      if (!isUrn(urn))
        throw new ValidationError(
          "conversationUrn is not a URN: pass the conversationUrn a 202 gave you (cld:common.Tenant.<t>/common.Conversation.<id>)",
          [urn.slice(0, 120)],
        );
      ownUrn(c, "Conversation", urn);
    });
    // A webhook URL the outbound guard refuses outright is refused before anything is written.
    if (req.callbackUrl !== undefined) callbackRefusal(notify, req.callbackUrl);
    // Idempotency-Key (1-200 characters, the caller's own): a retry gets the same 202.
    const idempotencyKey = c.req.header("Idempotency-Key");
    const submitted = await engine.submit({
      tenant: caller.tenant,
      roles: caller.roles,
      actor,
      text: req.text,
      // Scoped to the caller: a colleague's same key string is their own request.
      ...(idempotencyKey !== undefined ? { idempotencyKey, idempotencyScope: actor.id } : {}),
      ...(req.conversationUrn ? { conversationUrn: req.conversationUrn } : {}),
      ...(req.mode ? { mode: req.mode } : {}),
      ...(req.title ? { title: req.title } : {}),
    });
    if (notify && req.callbackUrl !== undefined) {
      await notify.subscribe(submitted.rootTaskId, {
        kind: "callback",
        id: callbackSubscriptionId(submitted.rootTaskId, req.callbackUrl),
        url: req.callbackUrl,
        tenant: caller.tenant,
        signer: actor.id, // its own secret signs them: no other key can forge them
      });
      await engine.deps.untilDurable(); // the 202 says the callback is kept too
    }
    const task = taskPath(submitted.rootTaskId);
    c.header("Location", task);
    return c.json({ ...submitted, links: { task } }, 202);
  });

  app.get("/v1/tasks/:urn", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    const { view, output } = await engine.result(urn, asker(c));
    if (!view) throw new NotFoundError("Task", urn);
    return c.json({ task: view, output: output ?? null });
  });

  app.get("/v1/tasks/:urn/interactions", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    const pending = await engine.pendingInteractions(urn, asker(c));
    if (!pending) throw new NotFoundError("Task", urn);
    return c.json({ interactions: pending.map(interactionView) });
  });

  app.get("/v1/tasks/:urn/tree", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    const query = TreeQuerySchema.safeParse(c.req.query());
    if (!query.success) throw new ValidationError("The query is not valid", formatIssues(query.error));
    const tree = await engine.tree(urn, asker(c), query.data.maxTasks);
    if (!tree) throw new NotFoundError("Task", urn);
    return c.json({
      tree: treeView(tree.root),
      taskCount: tree.taskCount,
      truncated: tree.truncated,
      maxTasks: query.data.maxTasks,
    });
  });

  app.post("/v1/tasks/:urn/cancel", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    const { reason } = await readJson(c, CancelSchema);
    const who = asker(c);
    // Checked read first: an unknown task is a 404, and a finished one keeps its output.
    const { view } = await engine.result(urn, who);
    if (!view) throw new NotFoundError("Task", urn);
    if (isTerminal(view.status)) throw new ConflictError(`Task ${urn} has already ended (${view.status})`);
    await engine.cancel(
      urn,
      who.actor,
      reason ?? `canceled over the HTTP API by ${who.actor.id}`,
      who.caller,
    );
    return c.json({ taskId: urn, links: { task: taskPath(urn) } }, 202);
  });

  app.post("/v1/interactions/:urn/answer", async (c) => {
    const { actor, caller } = c.get("who");
    const urn = ownUrn(c, "Interaction", c.req.param("urn"));
    const answer = await readJson(c, AnswerSchema);
    await engine.respond(urn, answer, actor, caller);
    return c.body(null, 204);
  });

  // Further routes, each behind the key, rate limit and body bound above.
  // Event streams count against the key's open streams (the same limiter as A2A's streams).
  app.route("/", createReadRoutes(engine, limiter ? { ...events, slots: limiter } : events));
  app.route("/", createTeamRoutes(engine));
  app.route("/", createToolRoutes(engine));
  app.route("/", createGraphRoutes(engine));
  app.route("/", createDocumentRoutes(engine));
  app.route("/", createArtifactRoutes(engine));
  app.route("/", createMemoryRoutes(engine));
  app.route("/", createSearchRoutes(engine));
  app.route("/", createEvalRoutes(engine));
  app.route("/", resourceEventRoutes(engine, limiter ? { ...events, slots: limiter } : events));
  app.route("/", createConversationRoutes(engine));
  app.route("/v1/admin/keys", adminKeyRoutes({ engine, keys }));
  if (notify) app.route("/", notifyRoutes({ engine, notify }));

  app.notFound(notFoundJson);
  app.onError(errorHandler(log));
  return app;
}

/** Throws ValidationError (400) when `url` cannot take callbacks here. */
function callbackRefusal(notify: NotifyService | undefined, url: string): void {
  if (!notify)
    throw new ValidationError(
      "This server delivers no webhooks: leave callbackUrl out and read the task instead",
    );
  const refused = notify.urlRefusal(url);
  if (refused) throw new ValidationError(`callbackUrl is refused: ${refused}`);
}

function interactionView(i: InteractionResource) {
  return { ...questionOf(i), taskId: parentUrn(i.meta.id), links: { answer: answerPath(i.meta.id) } };
}

/** A tree node as the API shows it: links to the task and to each question's answer. */
function treeView(node: TreeNode): unknown {
  return {
    ...node,
    pendingInteractions: node.pendingInteractions.map((i) => ({
      ...i,
      links: { answer: answerPath(i.urn) },
    })),
    children: node.children.map(treeView),
    links: { task: taskPath(node.taskId), tree: `${taskPath(node.taskId)}/tree` },
  };
}
