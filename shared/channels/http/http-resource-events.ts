import { type Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { isUrn, isWithin, MAX_URN_LENGTH, tenantUrn } from "../../domain/urn.ts";
import type { Engine } from "../../engine/engine.ts";
import { ForbiddenError, ValidationError } from "../../kernel/errors.ts";
import type { BusEnvelope } from "../../ports/event-bus.ts";
import {
  RESOURCE_EVENT_SOURCE,
  RESOURCE_EVENT_TYPES,
  type ResourceEventType,
} from "../../store/resource-events.ts";
import { type ApiEnv, asker, errorBody } from "./http-kit.ts";
import type { StreamSlots } from "./rate-limit.ts";
import { throttledMessage } from "./rate-limit.ts";

/**
 * `GET /v1/resource-events?prefix=<URN>&types=RESOURCE_PUT,RESOURCE_DELETE` with
 * `Accept: text/event-stream`: the resource writes announced from now on (store/resource-events.ts)
 * at the URN `prefix` or below it, as server-sent events:
 *
 *   id: <event id>       deterministic: the same write announced twice has the same id
 *   event: RESOURCE_PUT  or RESOURCE_DELETE
 *   data: {"id","time","type","urn","resourceType","name","contentHash","tenant"}
 *
 * `prefix` is a URN of the caller's tenant (a trailing `/` is allowed); it matches whole elements,
 * that URN and what lies below it (`.../common.Conversation.c1` never matches `...c10`). Another
 * tenant's URN, `cld:` alone or no URN: 403 / 400, before anything is subscribed. The prefix is
 * checked like a read of it (the policy), and then each event like a read of its URN, so a person
 * following the whole tenant sees only what they may read.
 *
 * Live only: there is no replay (the bus is not the record). A client that must miss nothing lists
 * the prefix after it connects (`GET /v1/resources/:urn/children`) and takes the events as hints.
 * A client that reads slower than the writes come gets at most `maxQueued` events held for it;
 * past that the stream says `event: overflow` and ends, and the client reconnects and lists again.
 *
 * Behind API Gateway (the API function, `mode: "bounded"`) there is no process that outlives a
 * request to hold a subscription, and no store of past events: 501, with the AWS way (an EventBridge
 * rule on Arbor's bus matching `resources` by prefix, docs/http-api.md, Resource events).
 */
export interface ResourceEventStreamOptions {
  mode?: "live" | "bounded";
  /** A heartbeat comment after this long without events (default 15 s). */
  heartbeatMs?: number;
  /** Events held for a client that does not read before the stream overflows (default 1,000). */
  maxQueued?: number;
  /** Open streams per key and per tenant (the app's rate limiter); absent: no bound. */
  slots?: StreamSlots;
}

export const RESOURCE_EVENTS_PATH = "/v1/resource-events";

const QUERY_KEYS = new Set(["prefix", "types"]);
/** Recent event ids a stream remembers to drop a second delivery of the same event. */
const SEEN_IDS = 1_000;

let streams = 0;

/** The prefix as a URN of the caller's tenant, or a ValidationError / ForbiddenError saying what to send. */
export function streamPrefix(raw: string | undefined, tenant: string): string {
  const own = tenantUrn(tenant);
  if (raw === undefined || raw.trim() === "")
    throw new ValidationError(
      `Say which resources to follow: ?prefix=<URN>, e.g. ?prefix=${encodeURIComponent(own)} for the whole tenant`,
    );
  if (raw.length > MAX_URN_LENGTH + 1)
    throw new ValidationError(`The prefix is ${raw.length} characters; a URN has at most ${MAX_URN_LENGTH}`);
  const urn = raw.endsWith("/") ? raw.slice(0, -1) : raw;
  if (!isUrn(urn))
    throw new ValidationError(
      `The prefix ${JSON.stringify(urn.slice(0, 80))} is not a URN: send a whole URN of your tenant, e.g. ${own}`,
    );
  if (!isWithin(urn, own))
    throw new ForbiddenError(`A resource event stream follows URNs of your own tenant only (below ${own})`);
  return urn;
}

function streamTypes(raw: string | undefined): ResourceEventType[] {
  if (raw === undefined || raw.trim() === "") return [...RESOURCE_EVENT_TYPES];
  const types = [...new Set(raw.split(",").map((t) => t.trim()))];
  const unknown = types.filter((t) => !(RESOURCE_EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length > 0 || types.length === 0)
    throw new ValidationError(
      `?types= takes ${RESOURCE_EVENT_TYPES.join(" and/or ")}, comma-separated (not ${unknown.join(", ").slice(0, 80)})`,
    );
  return types as ResourceEventType[];
}

/** The text of one event, as a server-sent event. */
function frame(e: BusEnvelope): string {
  const d = e.detail;
  const data = {
    id: e.id,
    time: e.time,
    type: e["detail-type"],
    urn: d.urn,
    resourceType: d.resourceType,
    name: d.name,
    contentHash: d.contentHash,
    ...(d.tenant !== undefined ? { tenant: d.tenant } : {}),
  };
  return `id: ${e.id}\nevent: ${e["detail-type"]}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Whether the caller may read what the event names (an event naming no URN: no). */
async function mayRead(engine: Engine, e: BusEnvelope, who: ReturnType<typeof asker>): Promise<boolean> {
  const urn = e.detail.urn;
  return typeof urn === "string" && isUrn(urn) && (await engine.mayRead(urn, who));
}

export function resourceEventRoutes(engine: Engine, options: ResourceEventStreamOptions = {}): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.get(RESOURCE_EVENTS_PATH, (c) => resourceEventStream(c, engine, options));
  return app;
}

async function resourceEventStream(
  c: Context<ApiEnv>,
  engine: Engine,
  options: ResourceEventStreamOptions,
): Promise<Response> {
  const query = c.req.query();
  const unknown = Object.keys(query).filter((k) => !QUERY_KEYS.has(k));
  if (unknown.length > 0)
    throw new ValidationError(
      `A resource event stream takes ?prefix=<URN> and ?types= only (not ${unknown.join(", ").slice(0, 200)})`,
    );
  const repeated = [...QUERY_KEYS].filter((k) => (c.req.queries(k)?.length ?? 0) > 1);
  if (repeated.length > 0)
    throw new ValidationError(`Give ?${repeated.join(" and ?")} once (a stream follows one prefix)`);
  const who = asker(c);
  const tenant = c.get("who").caller.tenant;
  const prefix = streamPrefix(query.prefix, tenant);
  const types = streamTypes(query.types);
  // The tenant's own level is followed by anyone of it (each event is checked below); below it,
  // the prefix is checked like a read of it.
  if (prefix !== tenantUrn(tenant)) await engine.authorize(who, "resource.read", prefix);
  if (options.mode === "bounded")
    return c.json(
      errorBody(
        "NOT_IMPLEMENTED",
        "This API keeps no resource events to stream: on AWS, add an EventBridge rule on Arbor's event bus " +
          `matching {"source":["arbor"],"detail-type":${JSON.stringify(types)},"resources":[{"prefix":"${prefix}/"}]} ` +
          "with your queue or API destination as its target (docs/http-api.md, Resource events); `arbor serve` streams them here",
      ),
      501,
    );
  if (!(c.req.header("accept") ?? "").toLowerCase().includes("text/event-stream"))
    throw new ValidationError("Resource events come as a stream: send Accept: text/event-stream");

  const close = options.slots?.openStream(c.get("who")) ?? (() => {});
  if (typeof close !== "function") {
    c.header("Retry-After", String(close.retryAfterSeconds));
    return c.json(errorBody("THROTTLED", throttledMessage(close), { scope: close.scope }), 429);
  }

  const maxQueued = options.maxQueued ?? 1_000;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const queue: BusEnvelope[] = [];
  const seen = new Set<string>();
  let overflowed = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  let off: (() => void) | undefined = engine.deps.bus.subscribe({
    name: `resource-events ${++streams}`,
    pattern: {
      source: [RESOURCE_EVENT_SOURCE],
      "detail-type": types,
      // Whole elements: the URN itself, or what lies below it.
      resources: [prefix, { prefix: `${prefix}/` }],
    },
    handler: async (event) => {
      if (overflowed || seen.has(event.id)) return; // EventBridge (and the tests' bus) may deliver twice
      seen.add(event.id);
      if (seen.size > SEEN_IDS) seen.delete(seen.values().next().value as string);
      if (queue.length >= maxQueued) {
        overflowed = true; // held no further: the client is told, and reconnects
        off?.();
        off = undefined;
      } else queue.push(event);
      poke();
    },
  });
  const unsubscribe = () => {
    off?.();
    off = undefined;
  };

  return streamSSE(c, async (stream) => {
    const controller = new AbortController();
    const stop = () => {
      controller.abort();
      poke();
    };
    stream.onAbort(stop);
    c.req.raw.signal.addEventListener("abort", stop, { once: true });
    try {
      await stream.write("retry: 3000\n\n");
      while (!controller.signal.aborted && !stream.aborted) {
        if (queue.length === 0 && !overflowed) {
          let timer: NodeJS.Timeout | undefined;
          const beat = await new Promise<boolean>((resolve) => {
            wake = () => resolve(false);
            timer = setTimeout(() => resolve(true), heartbeatMs);
          });
          clearTimeout(timer);
          wake = undefined;
          if (beat) await stream.write(": heartbeat\n\n");
          continue;
        }
        const batch = queue.splice(0, queue.length);
        const readable: BusEnvelope[] = [];
        for (const e of batch) if (await mayRead(engine, e, who)) readable.push(e);
        // Nothing leaves the process before the write it tells of is on disk.
        if (readable.length > 0) await engine.deps.untilDurable();
        if (readable.length > 0) await stream.write(readable.map(frame).join("")); // waits while the client does not read
        if (overflowed && queue.length === 0) {
          await stream.write(
            `event: overflow\ndata: ${JSON.stringify({ message: `More than ${maxQueued} events waited for this client: some were dropped. List the prefix again and reconnect.` })}\n\n`,
          );
          break;
        }
      }
    } finally {
      c.req.raw.signal.removeEventListener("abort", stop);
      unsubscribe();
      close();
    }
  });
}
