import { TooLargeError, ValidationError } from "../../errors.ts";
import { type BusEnvelope, type BusEventInput, MAX_EVENT_BYTES } from "../../ports/event-bus.ts";

/** Shared by every EventBus adapter, so local and AWS deliveries look the same. */

/** The size EventBridge charges an entry: Time (14) + Source + DetailType + Detail + Resources. */
export function entrySize(e: BusEventInput): number {
  let size =
    14 +
    Buffer.byteLength(e.source) +
    Buffer.byteLength(e.detailType) +
    Buffer.byteLength(JSON.stringify(e.detail));
  for (const r of e.resources ?? []) size += Buffer.byteLength(r);
  return size;
}

export function assertPublishable(e: BusEventInput): void {
  const problems: string[] = [];
  if (!e.id) problems.push("id is required");
  if (!e.source) problems.push("source is required");
  if (!e.detailType) problems.push("detailType is required");
  if (e.detail === null || typeof e.detail !== "object" || Array.isArray(e.detail))
    problems.push("detail must be a JSON object");
  if (problems.length) throw new ValidationError("Invalid bus event", problems);
  const size = entrySize(e);
  if (size > MAX_EVENT_BYTES) {
    throw new TooLargeError(
      `Bus event ${e.id} is ${size} bytes, over the ${MAX_EVENT_BYTES}-byte limit: store the payload as a resource and send its URN`,
      { id: e.id, size },
    );
  }
}

export function toEnvelope(
  e: BusEventInput,
  where: { account: string; region: string; now: Date },
): BusEnvelope {
  return {
    version: "0",
    id: e.id,
    "detail-type": e.detailType,
    source: e.source,
    account: where.account,
    time: e.time ?? where.now.toISOString().replace(/\.\d{3}Z$/, "Z"),
    region: where.region,
    resources: e.resources ?? [],
    detail: e.detail,
  };
}
