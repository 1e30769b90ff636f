import type { DeliveryData } from "./deliveries.ts";
import { type SigningSecrets, signatureHeaders } from "./signing.ts";

/**
 * One attempt at one delivery: a POST of its recorded body through the guarded fetch (urls.ts),
 * with a timeout, reading at most a little of the answer. How to drive it:
 *
 *   const result = await postDelivery(urls.fetch, record.data, { now, timeoutMs, secrets });
 *   // { delivered: true, status } on any 2xx; otherwise { delivered: false, error, status? }
 *
 * Headers: Content-Type (the body's), `Arbor-Delivery-Id` (the event id: the same on every attempt,
 * receivers deduplicate on it), the delivery's own (an A2A push's Authorization and
 * X-A2A-Notification-Token), and for a callback the Standard Webhooks signature made now (signing.ts:
 * `webhook-id`, `webhook-timestamp`, `webhook-signature`, and the deprecated `Arbor-Signature`). A 3xx is
 * a failure (the guard follows no redirect); so is a timeout, a refused address, any non-2xx.
 * The status decides: the answer's body is read for a second at most, then let go.
 */
export const DELIVERY_ID_HEADER = "Arbor-Delivery-Id";
/** How much of a receiver's answer is read (to free the connection; the content is not used). */
const READ_LIMIT = 4096;
/** How long that reading may take once the status is in. */
const DRAIN_MS = 1_000;

export type PostResult =
  | { delivered: true; status: number }
  | { delivered: false; error: string; status?: number };

export async function postDelivery(
  guardedFetch: typeof fetch,
  d: DeliveryData,
  options: { now: Date; timeoutMs: number; secrets?: SigningSecrets | undefined },
): Promise<PostResult> {
  const headers: Record<string, string> = {
    "Content-Type": d.contentType,
    "User-Agent": "Arbor-Notify/1",
    [DELIVERY_ID_HEADER]: d.id,
    ...d.headers,
  };
  if (d.signed) {
    if (!options.secrets) return { delivered: false, error: "no signing secret for the callback's tenant" };
    Object.assign(headers, signatureHeaders(options.secrets, d.id, d.body, options.now));
  }
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    const response = await guardedFetch(d.url, { method: "POST", headers, body: d.body, signal });
    await drain(response);
    if (response.status >= 200 && response.status < 300) return { delivered: true, status: response.status };
    return {
      delivered: false,
      status: response.status,
      error: `the receiver answered HTTP ${response.status}`,
    };
  } catch (e) {
    const error = e as Error;
    if (signal.aborted) return { delivered: false, error: `no answer within ${options.timeoutMs} ms` };
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return { delivered: false, error: `${error.message}${cause}` };
  }
}

/**
 * Reads a few KB of the body, for at most DRAIN_MS, and lets go of the rest: a receiver that drips
 * its answer, or never ends it, holds the attempt no longer (its connection is closed).
 */
async function drain(response: Response): Promise<void> {
  const reader = response.body?.getReader();
  if (!reader) return;
  let seen = 0;
  const giveUp = setTimeout(() => void reader.cancel().catch(() => undefined), DRAIN_MS);
  try {
    while (seen < READ_LIMIT) {
      const { done, value } = await reader.read();
      if (done) return;
      seen += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The answer's body does not matter: the status decided.
  } finally {
    clearTimeout(giveUp);
  }
}
