import { type Context, Hono } from "hono";
import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import { tenantUrn } from "../../domain/urn.ts";
import type { Engine } from "../../engine/engine.ts";
import { NotFoundError, ValidationError } from "../../kernel/errors.ts";
import { type EventStreamOptions, eventStream, wantsEventStream } from "./http-events.ts";
import { type ApiEnv, asker, ownUrn } from "./http-kit.ts";

/**
 * The HTTP API's read routes, what a remote `arbor ls`, `get` and `events` need (mounted in
 * http-api.ts, behind its key, rate limit and body bound):
 *
 *   GET /v1/me                                       who the key stands for            -> 200
 *   GET /v1/resources/:urn                           one resource                      -> 200
 *   GET /v1/resources/:urn/children?limit=&cursor=   one level below it, a page        -> 200
 *   GET /v1/tasks/:urn/events?fromSeq=&limit=        a task's events, a page (JSON)    -> 200
 *
 * Each checks like the other routes: a URN outside the caller's tenant is a 404 before anything is
 * read; then the policy (403). Children are listed only as far as the caller may read each (a
 * person sees their own conversations below the tenant, an admin all); the tenant itself may be
 * listed so by anyone of it. The events route answers JSON (`Accept: application/json`, or none):
 * a stream of server-sent events on the same path is for `Accept: text/event-stream` (the task and
 * every task below it, resumable with Last-Event-ID: http-events.ts).
 */
export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

const ChildrenQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(DEFAULT_PAGE),
    cursor: z.string().min(1).max(2048).optional(),
  })
  .strict();
const EventsQuery = z
  .object({
    fromSeq: z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER).default(1),
    limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(DEFAULT_PAGE),
  })
  .strict();

function query<S extends z.ZodType>(c: Context, schema: S): z.output<S> {
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success) throw new ValidationError("The query is not valid", formatIssues(parsed.error));
  return parsed.data;
}

const resourcePath = (urn: string) => `/v1/resources/${encodeURIComponent(urn)}`;

export function createReadRoutes(engine: Engine, streams: EventStreamOptions = {}): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  // Read when a request comes (an engine stand-in without stores still mounts the routes).
  const resources = () => engine.deps.resources;

  // Who the key stands for: what a client needs to address its own tenant (`arbor ls`).
  app.get("/v1/me", (c) => {
    const { actor, caller } = c.get("who");
    return c.json({ actor, tenant: caller.tenant, roles: caller.roles, tenantUrn: tenantUrn(caller.tenant) });
  });

  app.get("/v1/resources/:urn", async (c) => {
    const urn = ownUrn(c, "Resource", c.req.param("urn"));
    await engine.authorize(asker(c), "resource.read", urn);
    const resource = await resources().get(urn);
    if (!resource) throw new NotFoundError("Resource", urn);
    return c.json({ resource, links: { children: `${resourcePath(urn)}/children` } });
  });

  app.get("/v1/resources/:urn/children", async (c) => {
    const urn = ownUrn(c, "Resource", c.req.param("urn"));
    const q = query(c, ChildrenQuery);
    const who = asker(c);
    // The tenant's own level is listed to anyone of it, each child as far as they may read it.
    if (urn !== tenantUrn(c.get("who").caller.tenant)) await engine.authorize(who, "resource.read", urn);
    const page = await resources().childPage(urn, {
      limit: q.limit,
      ...(q.cursor ? { cursor: q.cursor } : {}),
    });
    const readable: string[] = [];
    for (const child of page.urns) if (await engine.mayRead(child, who)) readable.push(child);
    const docs = await resources().getMany(readable);
    const children = docs.flatMap((d) =>
      d
        ? [
            {
              urn: d.meta.id,
              type: d.meta.type,
              name: d.meta.name,
              links: { resource: resourcePath(d.meta.id) },
            },
          ]
        : [],
    );
    return c.json({ urn, children, ...(page.cursor ? { cursor: page.cursor } : {}) });
  });

  app.get("/v1/tasks/:urn/events", async (c) => {
    const urn = ownUrn(c, "Task", c.req.param("urn"));
    if (wantsEventStream(c)) return eventStream(c, engine, urn, streams);
    const q = query(c, EventsQuery);
    await engine.authorize(asker(c), "resource.read", urn);
    const events = await engine.deps.state.readStream(urn, { fromSeq: q.fromSeq, limit: q.limit });
    if (events.length === 0 && q.fromSeq === 1 && !(await engine.result(urn)).view)
      throw new NotFoundError("Task", urn);
    const last = events.at(-1);
    return c.json({
      taskId: urn,
      events,
      ...(events.length === q.limit && last ? { nextFromSeq: last.seq + 1 } : {}),
    });
  });

  return app;
}
