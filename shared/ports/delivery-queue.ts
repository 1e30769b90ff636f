import * as z from "zod";
import { ValidationError } from "../kernel/errors.ts";

/**
 * Delivery queue port: the ids of webhook deliveries (shared/notify/deliveries.ts) to attempt, each
 * after an optional delay. The record in the state is the truth (its status, its schedule); a
 * queued id is only a reminder to attempt it, so an id queued twice, or lost, is harmless: the
 * attempt claims the record (a conditional write), and the notify sweep queues what is due and
 * was never reminded of. How to drive it:
 *
 *   await queue.enqueue(ids);                        // attempt these now
 *   await queue.enqueue([id], { delaySeconds: 120 }); // not before two minutes (at most MAX_DELAY_SECONDS)
 *
 * Adapters: Amazon SQS (shared/adapters/aws/sqs-delivery-queue.ts), consumed by the notify
 * function (functions/notify.ts). The local runtime needs none: its worker attempts in process.
 */
export interface DeliveryQueue {
  /** Queues every id (none: nothing is sent); throws when any could not be queued. */
  enqueue(ids: readonly string[], options?: { delaySeconds?: number }): Promise<void>;
}

/** The longest delay a queue takes (SQS's limit: 15 minutes). */
export const MAX_DELAY_SECONDS = 900;

/** A delivery id as deliveries.ts makes them. */
const DELIVERY_ID = /^dlv_[A-Za-z0-9_-]{1,100}$/;

/** Checks what `enqueue` is given before anything is sent: ValidationError, saying what is wrong. */
export function checkEnqueue(ids: readonly string[], delaySeconds: number): void {
  if (!Number.isInteger(delaySeconds) || delaySeconds < 0 || delaySeconds > MAX_DELAY_SECONDS)
    throw new ValidationError(
      `A delivery's delay is whole seconds from 0 to ${MAX_DELAY_SECONDS} (SQS's limit), not ${delaySeconds}: ` +
        "a later attempt is queued again when this one comes due",
    );
  const bad = ids.filter((id) => !DELIVERY_ID.test(id));
  if (bad.length > 0)
    throw new ValidationError(
      "Only delivery ids (dlv_..., as notify records them) are queued",
      bad.slice(0, 5).map((id) => JSON.stringify(id)),
    );
}

/** Seconds from `now` until `at`, rounded up, within what a queue takes. */
export function delayUntil(at: Date, now: Date): number {
  const s = Math.ceil((at.getTime() - now.getTime()) / 1000);
  return Math.min(MAX_DELAY_SECONDS, Math.max(0, s));
}

const DeliveryMessageSchema = z.object({ deliveryId: z.string().regex(DELIVERY_ID) });

/** The body of a queued delivery: `{"deliveryId":"dlv_..."}` (what every adapter sends). */
export const deliveryMessage = (id: string): string => JSON.stringify({ deliveryId: id });

/** The delivery id a queue message carries, or undefined when the body is not a delivery message. */
export function deliveryOfMessage(body: string): string | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return undefined;
  }
  const parsed = DeliveryMessageSchema.safeParse(json);
  return parsed.success ? parsed.data.deliveryId : undefined;
}
