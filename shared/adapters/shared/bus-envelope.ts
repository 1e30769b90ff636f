import { TooLargeError, ValidationError } from "../../kernel/errors.ts";
import { currentTraceparent, tracingOn } from "../../kernel/tracing.ts";
import { type BusEnvelope, type BusEventInput, MAX_EVENT_BYTES } from "../../ports/event-bus.ts";

/**
 * Rules every EventBus adapter shares, so that an event accepted locally is accepted on AWS and
 * arrives looking the same.
 *
 * Event ids: EventBridge gives each entry an id of its own, but handlers deduplicate on the id the
 * publisher chose. So the publisher's id travels in the detail under EVENT_ID_DETAIL_KEY (reserved;
 * its bytes count toward the size limit on every adapter) and is put back into `id` on delivery.
 */
export const EVENT_ID_DETAIL_KEY = "arbor-event-id";
/** Where the publisher's trace context travels in the detail (reserved too); put back on delivery. */
export const TRACE_DETAIL_KEY = "arbor-traceparent";

/** The event with the trace context it carries: its own, else the publisher's active one (tracing on). */
export function traced(e: BusEventInput): BusEventInput {
  if (e.traceparent || !tracingOn()) return e;
  const traceparent = currentTraceparent();
  return traceparent ? { ...e, traceparent } : e;
}

/** The detail as sent over the wire, with the publisher's id (and trace context) inside. */
export const wireDetail = (e: BusEventInput): Record<string, unknown> => ({
  ...e.detail,
  [EVENT_ID_DETAIL_KEY]: e.id,
  ...(e.traceparent ? { [TRACE_DETAIL_KEY]: e.traceparent } : {}),
});

/**
 * wireDetail as JSON, made from the detail's own JSON: the reserved keys come after the detail's
 * (as in wireDetail), so the detail is serialized once whatever is done with it.
 */
export function wireDetailJson(e: BusEventInput, detailJson: string): string {
  const reserved =
    `"${EVENT_ID_DETAIL_KEY}":${JSON.stringify(e.id)}` +
    (e.traceparent ? `,"${TRACE_DETAIL_KEY}":${JSON.stringify(e.traceparent)}` : "");
  return detailJson === "{}" ? `{${reserved}}` : `${detailJson.slice(0, -1)},${reserved}}`;
}

/** The size EventBridge charges an entry: Time (14) + Source + DetailType + Detail (as sent) + Resources. */
export function entrySize(e: Omit<BusEventInput, "detail">, detailJson: string): number {
  let size =
    14 + Buffer.byteLength(e.source) + Buffer.byteLength(e.detailType) + Buffer.byteLength(detailJson);
  for (const r of e.resources ?? []) size += Buffer.byteLength(r);
  return size;
}

/**
 * Checks an event against the rules every adapter shares (and EventBridge's size limit, counted
 * on the detail as sent); returns its detail as JSON, which the caller may use instead of
 * serializing it again.
 */
export function assertPublishable(e: BusEventInput): string {
  const problems: string[] = [];
  let json = "";
  if (!e.id) problems.push("id is required");
  if (!e.source) problems.push("source is required");
  if (!e.detailType) problems.push("detailType is required");
  if (e.detail === null || typeof e.detail !== "object" || Array.isArray(e.detail))
    problems.push("detail must be a JSON object");
  else {
    for (const key of [EVENT_ID_DETAIL_KEY, TRACE_DETAIL_KEY])
      if (Object.hasOwn(e.detail, key)) problems.push(`detail.${key} is reserved by the bus`);
    try {
      json = JSON.stringify(e.detail);
    } catch (cause) {
      problems.push(`detail must be plain JSON (${(cause as Error).message})`);
    }
  }
  if (e.time !== undefined && Number.isNaN(Date.parse(e.time)))
    problems.push(`time ${JSON.stringify(e.time)} is not an ISO 8601 date`);
  if (problems.length) throw new ValidationError(`Invalid bus event ${e.id ?? ""}`.trim(), problems);
  const size = entrySize(e, wireDetailJson(e, json));
  if (size > MAX_EVENT_BYTES) {
    throw new TooLargeError(
      `Bus event ${e.id} is ${size} bytes, over the ${MAX_EVENT_BYTES}-byte limit: store the payload as a resource and send its URN`,
      { id: e.id, size },
    );
  }
  return json;
}

/** ISO 8601 to the second, as EventBridge stamps `time` (the last one kept: a burst shares its second). */
let stamped = { second: Number.NaN, iso: "" };
function toSeconds(d: Date): string {
  const second = Math.floor(d.getTime() / 1000);
  if (second !== stamped.second) stamped = { second, iso: `${d.toISOString().slice(0, 19)}Z` };
  return stamped.iso;
}

/**
 * The envelope a handler receives: detail as plain JSON, time to the second. A copy of what the
 * event holds (its detail parsed from `detailJson` when given: assertPublishable's), so the
 * envelope may be frozen and shared.
 */
export function toEnvelope(
  e: BusEventInput,
  where: { account: string; region: string; now: Date },
  detailJson = JSON.stringify(e.detail),
): BusEnvelope {
  return {
    version: "0",
    id: e.id,
    "detail-type": e.detailType,
    source: e.source,
    account: where.account,
    time: toSeconds(e.time === undefined ? where.now : new Date(e.time)),
    region: where.region,
    resources: [...(e.resources ?? [])],
    detail: JSON.parse(detailJson) as Record<string, unknown>,
    ...(e.traceparent ? { traceparent: e.traceparent } : {}),
  };
}
