import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { compress } from "hono/compress";
import { requestId } from "hono/request-id";
import * as z from "zod";
import type { InteractionResource, Message } from "../../domain/resources.ts";
import { formatIssues } from "../../domain/resources.ts";
import type { Engine } from "../../engine/engine.ts";
import { windowStart } from "../../engine/window/window-marks.ts";
import { ERROR_EDGES } from "../../kernel/error-edges.ts";
import {
  type ArborError,
  ForbiddenError,
  isArborError,
  NotFoundError,
  ValidationError,
} from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import { deliveryView } from "../../notify/deliveries.ts";
import { rootTaskOf } from "../../notify/feed.ts";
import type { NotifyService } from "../../notify/service.ts";
import type { AuditLog } from "../../ports/audit-log.ts";
import { type Authenticated, bearerKeyHash, type KeyStore } from "../../ports/key-store.ts";
import { keysUrn, keyView } from "../http/admin-keys.ts";
import { readDatasets, readExperiment, readExperiments } from "../http/http-evals.ts";
import { type ApiEnv, type HttpApiLog, withinTenant } from "../http/http-kit.ts";
import { notifyUrn } from "../http/http-notify.ts";
import { type RateLimiter, throttledMessage } from "../http/rate-limit.ts";
import { sourceAddress } from "../http/source-address.ts";
import { assetResponse } from "./assets.ts";
import { barePage, CONSOLE, type Html, html, isAdmin, notice, type PageFrame, page } from "./html.ts";
import { deliveriesBody, keysBody, policyBody, teamBody } from "./pages/admin.ts";
import { experimentBody, experimentsBody } from "./pages/evals.ts";
import { questionForm } from "./pages/question.ts";
import { questionsBody, waitingQuestions } from "./pages/questions.ts";
import { liveBody, type RequestPageData, requestBody } from "./pages/request.ts";
import { type RequestsQuery, requestRows, requestsBody, STATE_FILTERS } from "./pages/requests.ts";
import { safeNext, signInPage } from "./pages/sign-in.ts";
import { EVENTS_PAGE, taskBody } from "./pages/task.ts";
import {
  clearSessionCookie,
  csrfRefusal,
  fromAnotherSite,
  sessionToken,
  setSessionCookie,
} from "./session-cookie.ts";
import type { ConsoleSession, ConsoleSessions } from "./sessions.ts";

/**
 * Arbor's web console, served under /console by the one app (http-server.ts), on `arbor serve` and
 * behind API Gateway alike. Its pages are HTML made on the server (html.ts, pages/) from the same
 * engine entry points the HTTP API calls, as the signed-in principal; its one script
 * (assets/console.js) follows a request live over the API's event stream and sends every change
 * (a new request, an answer, a cancel, the admins' changes) to the HTTP API, with the session.
 *
 *   GET  /console/assets/:name       the script and the style sheet (public)
 *   GET  /console/login              the sign-in form
 *   POST /console/login              {key, next}: a session (cookie) and on to `next`; 401 with the form again
 *   POST /console/logout             {csrf}: the session ended, back to the form
 *   GET  /console                    requests (?state=&scope=mine|all&cursor=), and a new one
 *   GET  /console/requests/:urn      a request's tree, live (?part=live: the part that changes)
 *   GET  /console/tasks/:urn         a task's timeline (?page= of its output, ?from= of its events)
 *   GET  /console/questions          questions waiting for the signed-in person
 *   GET  /console/questions/:urn     one question as it stands (answered: by whom), a part of a page
 *   GET  /console/admin/team|keys|deliveries|policy|evals[/:id]   the admins' pages
 *
 * Every page sends a strict Content-Security-Policy (scripts and styles from this origin only, no
 * inline script, no framing), and is no-store. A page without a session redirects to the sign-in
 * form with `next` (a shared link opens once signed in). Pages count against the key's and the
 * tenant's rate limits like API calls. A URN of another tenant is a not-found page.
 */
export interface ConsoleParts {
  engine: Engine;
  keys: KeyStore;
  sessions: ConsoleSessions;
  limiter?: RateLimiter;
  notify?: NotifyService;
  /** The tool calls' audit log: a task's timeline lists its calls (none shown without it). */
  audit?: AuditLog;
  log?: HttpApiLog;
}

type ConsoleEnv = { Variables: ApiEnv["Variables"] & { session: ConsoleSession } };

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

/** How large a form posted to the console may be (the sign-in form, the sign-out form). */
const MAX_FORM_BYTES = 16 * 1024;

const headers: MiddlewareHandler = async (c, next) => {
  await next();
  c.header("Content-Security-Policy", CONTENT_SECURITY_POLICY);
  c.header("X-Content-Type-Options", "nosniff");
  c.header("X-Frame-Options", "DENY");
  c.header("Referrer-Policy", "no-referrer");
  c.header("Cross-Origin-Opener-Policy", "same-origin");
  if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
};

const RequestsQuerySchema = z
  .object({
    state: z.enum(STATE_FILTERS).default("all"),
    scope: z.enum(["mine", "all"]).default("mine"),
    cursor: z.string().min(1).max(2048).optional(),
  })
  .strict();
const TaskQuerySchema = z
  .object({
    page: z.coerce.number().int().min(1).max(100_000).default(1),
    from: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).default(1),
  })
  .strict();
const RequestQuerySchema = z.object({ part: z.enum(["live"]).optional() }).strict();

function query<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success)
    throw new ValidationError("The address's query is not valid", formatIssues(parsed.error));
  return parsed.data;
}

/** A task's transcript in the order it was made: the prompt, the turns, the answer. */
function transcriptOrder(messages: Message[]): Message[] {
  const rank = (m: Message) => (m.meta.name === "prompt" ? 0 : m.meta.name === "output" ? 2 : 1);
  return [...messages].sort((a, b) => rank(a) - rank(b) || a.meta.name.localeCompare(b.meta.name));
}

const policyUrn = (tenant: string) => `cld:common.Tenant.${tenant}/common.Policy.current`;

export function createConsoleApp(parts: ConsoleParts): Hono<ConsoleEnv> {
  const { engine, keys, sessions, limiter, notify } = parts;
  const log = parts.log ?? componentLogger("console");
  const app = new Hono<ConsoleEnv>();
  for (const path of [CONSOLE, `${CONSOLE}/*`]) {
    app.use(path, headers);
    app.use(path, requestId());
    // Pages and files go compressed to a browser that takes it (they are text: a fifth of their size).
    app.use(path, compress());
  }
  app.use(
    `${CONSOLE}/*`,
    bodyLimit({
      maxSize: MAX_FORM_BYTES,
      onError: (c) =>
        c.html(barePage("Too large", notice("error", "That form is larger than the console takes.")), 413),
    }),
  );

  app.get(`${CONSOLE}/assets/:name`, (c) => assetResponse(c, c.req.param("name")));

  app.get(`${CONSOLE}/login`, async (c) => {
    const next = safeNext(c.req.query("next"));
    if (await sessions.check(sessionToken(c))) return c.redirect(next, 303);
    return c.html(signInPage({ next, plainHttp: plainHttpFromAfar(c) }));
  });

  app.post(`${CONSOLE}/login`, async (c) => {
    // A sign-in another site makes the browser send would sign the person in as someone else.
    if (fromAnotherSite(c))
      return c.html(
        signInPage({ next: CONSOLE, problem: "A sign-in sent by another site is refused." }),
        403,
      );
    const source = sourceAddress(c);
    const flooding = limiter?.unknownKeysFrom(source);
    if (flooding) {
      c.header("Retry-After", String(flooding.retryAfterSeconds));
      return c.html(signInPage({ next: CONSOLE, problem: throttledMessage(flooding) }), 429);
    }
    const form = await c.req.parseBody();
    const key = typeof form.key === "string" ? form.key.trim() : "";
    const next = safeNext(typeof form.next === "string" ? form.next : undefined);
    const header = `Bearer ${key}`;
    const sha = bearerKeyHash(header);
    const who = sha === undefined ? undefined : await keys.authenticate(header);
    if (!who || sha === undefined) {
      limiter?.unknownKey(source);
      return c.html(
        signInPage({ next, problem: "That API key is not known here: check it, or ask an admin for one." }),
        401,
      );
    }
    if (who.actor.kind !== "human")
      return c.html(
        signInPage({
          next,
          problem: `That key is a remote agent's (${who.actor.id}): the console is for people. Sign in with a user_ key.`,
        }),
        403,
      );
    const throttled = limiter?.take(who);
    if (throttled) {
      c.header("Retry-After", String(throttled.retryAfterSeconds));
      return c.html(signInPage({ next, problem: throttledMessage(throttled) }), 429);
    }
    const { token } = await sessions.open(sha, who);
    setSessionCookie(c, token, sessions.ttlMs / 1000);
    return c.redirect(next, 303);
  });

  // Everything below needs a session.
  const withSession: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
    const session = await sessions.check(sessionToken(c));
    if (!session) {
      const url = new URL(c.req.url);
      if (c.req.method === "GET")
        return c.redirect(`${CONSOLE}/login?next=${encodeURIComponent(url.pathname + url.search)}`, 303);
      return c.html(signInPage({ next: CONSOLE, problem: "Your session has ended: sign in again." }), 401);
    }
    const throttled = limiter?.take(session.who);
    if (throttled) {
      c.header("Retry-After", String(throttled.retryAfterSeconds));
      return c.html(barePage("Slow down", notice("error", throttledMessage(throttled))), 429);
    }
    c.set("who", session.who);
    c.set("session", session);
    await next();
  };
  app.use(CONSOLE, withSession);
  app.use(`${CONSOLE}/*`, withSession);

  app.post(`${CONSOLE}/logout`, async (c) => {
    const form = await c.req.parseBody();
    const refused = csrfRefusal(c, c.get("session"), typeof form.csrf === "string" ? form.csrf : undefined);
    if (refused) return c.html(barePage("Refused", notice("error", refused)), 403);
    await sessions.close(sessionToken(c));
    clearSessionCookie(c);
    return c.redirect(`${CONSOLE}/login`, 303);
  });

  const show = (c: Context<ConsoleEnv>, title: string, nav: PageFrame["nav"], body: Html) =>
    c.html(page({ title, nav, body, who: c.get("who"), csrf: c.get("session").csrf }));
  const now = () => engine.deps.clock();

  app.get(CONSOLE, async (c) => {
    const { cursor, ...rest } = query(c, RequestsQuerySchema);
    const q: RequestsQuery = { ...rest, ...(cursor ? { cursor } : {}) };
    const who = c.get("who");
    // The tenant's list is read row by row as the policy lets each be read: only an admin's is worth
    // reading (anyone else would be shown their own, after reading everybody's).
    if (q.scope === "all" && !isAdmin(who))
      throw new ForbiddenError('Only an admin sees the tenant\'s requests: yours are under "mine"');
    const [list, team] = await Promise.all([
      requestRows(engine, who, q),
      // The team is the admins' to read: a person who may not sees the form without it.
      engine.team(who.caller.tenant, who).catch((e: unknown) => {
        if (e instanceof ForbiddenError) return undefined;
        throw e;
      }),
    ]);
    return show(c, "Requests", "requests", requestsBody({ who, q, ...list, team, now: now() }));
  });

  app.get(`${CONSOLE}/requests/:urn`, async (c) => {
    const urn = withinTenant(c.get("who"), "Task", c.req.param("urn"));
    const { part } = query(c, RequestQuerySchema);
    const who = c.get("who");
    const tree = await engine.tree(urn, who);
    if (!tree) throw new NotFoundError("Request", urn);
    // The tree found the questions waiting below the request already: they are not looked for again.
    const { view, output } = await engine.result(urn, who);
    if (!view) throw new NotFoundError("Request", urn);
    const data: RequestPageData = { tree, root: view, output, questions: [...tree.pending], now: now() };
    if (part === "live") return c.html(liveBody(data));
    return show(c, view.title, "requests", requestBody(data));
  });

  app.get(`${CONSOLE}/tasks/:urn`, async (c) => {
    const urn = withinTenant(c.get("who"), "Task", c.req.param("urn"));
    const q = query(c, TaskQuerySchema);
    const who = c.get("who");
    const tree = await engine.tree(urn, who, 50);
    const { view, output } = await engine.result(urn, who);
    if (!tree || !view) throw new NotFoundError("Task", urn);
    const { state, resources } = engine.deps;
    const root = rootTaskOf(urn);
    const [events, messages, windowFrom, toolCalls, asked, deliveries] = await Promise.all([
      state.readStream(urn, { fromSeq: q.from, limit: EVENTS_PAGE }),
      resources.children(urn, "common.Message") as Promise<Message[]>,
      windowStart(engine.deps, urn),
      parts.audit ? parts.audit.forTask(urn) : Promise.resolve([]),
      resources.children(urn, "uip.Interaction") as Promise<InteractionResource[]>,
      root === urn
        ? state.byParent(`notify-deliveries#${urn}`, { limit: 100 }).then((p) => p.items)
        : Promise.resolve([]),
    ]);
    return show(
      c,
      view.title,
      "requests",
      taskBody({
        view,
        node: tree.root,
        rootTaskId: root,
        output,
        outputPage: q.page,
        events,
        eventsFrom: q.from,
        messages: transcriptOrder(messages),
        windowFrom,
        toolCalls,
        questions: asked,
        deliveries: deliveries.map((r) => deliveryView(r as Parameters<typeof deliveryView>[0])),
        now: now(),
      }),
    );
  });

  app.get(`${CONSOLE}/questions`, async (c) => {
    const waiting = await waitingQuestions(engine, c.get("who"));
    return show(c, "Questions", "questions", questionsBody(waiting));
  });

  app.get(`${CONSOLE}/questions/:urn`, async (c) => {
    const urn = withinTenant(c.get("who"), "Interaction", c.req.param("urn"));
    await engine.authorize(c.get("who"), "resource.read", urn);
    const question = await engine.deps.resources.getAs("uip.Interaction", urn);
    if (!question) throw new NotFoundError("Interaction", urn);
    return c.html(questionForm(question, { showTask: true }));
  });

  app.get(`${CONSOLE}/admin/team`, async (c) => {
    const who = c.get("who");
    return show(c, "Team", "team", teamBody(await engine.team(who.caller.tenant, who)));
  });

  app.get(`${CONSOLE}/admin/keys`, async (c) => {
    const { tenant } = c.get("who").caller;
    await engine.authorize(c.get("who"), "resource.read", keysUrn(tenant, "list"));
    return show(c, "Keys", "keys", keysBody((await keys.list(tenant)).map(keyView), tenant));
  });

  app.get(`${CONSOLE}/admin/deliveries`, async (c) => {
    const { tenant } = c.get("who").caller;
    await engine.authorize(c.get("who"), "resource.read", notifyUrn(tenant, "Delivery", "list"));
    const dead = notify ? await notify.deliveries("dead", { tenant, limit: 100 }) : { items: [] };
    return show(
      c,
      "Deliveries",
      "deliveries",
      deliveriesBody(dead.items.map(deliveryView), "cursor" in dead && dead.cursor !== undefined),
    );
  });

  app.get(`${CONSOLE}/admin/evals`, async (c) =>
    show(
      c,
      "Experiments",
      "evals",
      experimentsBody(await readExperiments(engine, c.get("who")), await readDatasets(engine, c.get("who"))),
    ),
  );

  app.get(`${CONSOLE}/admin/evals/:id`, async (c) =>
    show(
      c,
      "Experiment",
      "evals",
      experimentBody(await readExperiment(engine, c.get("who"), c.req.param("id"))),
    ),
  );

  app.get(`${CONSOLE}/admin/policy`, async (c) => {
    await engine.authorize(c.get("who"), "resource.read", policyUrn(c.get("who").caller.tenant));
    const { policy } = engine.deps;
    return show(c, "Policy", "policy", policyBody({ engine: policy.engine, revision: policy.revision }));
  });

  app.notFound((c) => c.html(errorPage(c, 404, "There is no such page in the console."), 404));
  app.onError((error, c) => {
    const edge = isArborError(error) ? ERROR_EDGES[error.code] : undefined;
    if (edge?.shown) {
      const e = error as ArborError;
      const status = edge.http;
      const text =
        e.code === "NOT_FOUND" ? "Not found: there is nothing here, or it is not yours to see." : e.message;
      return c.html(errorPage(c, status, text), status);
    }
    const id = (c.get("requestId") as string | undefined) ?? "";
    log.error("console request failed", { requestId: id, method: c.req.method, path: c.req.path, error });
    return c.html(
      errorPage(c, 500, `Something went wrong on our side (request id ${id}); try again later.`),
      500,
    );
  });
  return app;
}

function errorPage(c: Context<ConsoleEnv>, status: number, text: string): Html {
  const body = html`<h1>${status === 404 ? "Not found" : status === 403 ? "Not allowed" : "Something is wrong"}</h1>${notice("error", text)}<p><a href="${CONSOLE}">Back to the requests</a></p>`;
  const who: Authenticated | undefined = c.get("who");
  const session = c.get("session");
  return who && session
    ? page({ title: "Error", nav: "", body, who, csrf: session.csrf })
    : barePage("Error", body);
}

/** Whether the page was asked for over plain HTTP by another machine (whose browser will drop a Secure cookie). */
function plainHttpFromAfar(c: Context): boolean {
  const url = new URL(c.req.url);
  if (url.protocol !== "http:") return false;
  const host = url.hostname;
  return !(host === "localhost" || host === "127.0.0.1" || host === "[::1]" || host.endsWith(".localhost"));
}
