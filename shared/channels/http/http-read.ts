import { ArborError } from "../../kernel/errors.ts";
/**
 * Small HTTP helpers the chat channels share (a Slack or Teams request's body, the Teams key set
 * fetches, the Bot Connector calls). How to drive it:
 *
 *   const text = await readBounded(response, 64 * 1024);   // throws BodyTooLargeError past the bound
 *   const res = await fetchWithTimeout(fetch, url, init, 10_000);  // aborts after the timeout
 *   const raw = await readBounded(request.raw, 256 * 1024) // an incoming Request's body too
 */
export class BodyTooLargeError extends ArborError {
  constructor(limit: number) {
    super("TOO_LARGE", `the body is longer than ${limit} bytes`, { details: { limit } });
  }
}

/** Reads a body as UTF-8 text, at most `limit` bytes (the rest is not read: the stream is canceled). */
export async function readBounded(source: Response | Request, limit: number): Promise<string> {
  const declared = Number(source.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limit) {
    await source.body?.cancel().catch(() => undefined);
    throw new BodyTooLargeError(limit);
  }
  if (!source.body) return "";
  const reader = source.body.getReader();
  const chunks: Uint8Array[] = [];
  let seen = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += value.byteLength;
    if (seen > limit) {
      await reader.cancel().catch(() => undefined);
      throw new BodyTooLargeError(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** `fetch` that gives up after `timeoutMs` (an AbortSignal.timeout, combined with the caller's). */
export function fetchWithTimeout(
  fetchImpl: typeof fetch,
  url: string,
  init: RequestInit,
  timeoutMs: number,
): Promise<Response> {
  return fetchImpl(url, { ...init, signal: AbortSignal.timeout(timeoutMs), redirect: "manual" });
}
