import { DOCUMENT_LIMITS } from "../domain/documents.ts";
import { isArborError, TooLargeError, ValidationError } from "../kernel/errors.ts";

/**
 * A document added by its URL: fetched through the outbound guard the caller gives (no loopback,
 * private or metadata address, no redirect followed: shared/outbound/guard.ts), within
 * DOCUMENT_LIMITS.bytes and 30 seconds. Answers the bytes and the type the server says.
 */
export async function fetchDocument(
  fetchImpl: typeof fetch,
  url: string,
  /** Sent with the request: a chat platform's bot token for a file shared with the bot. */
  headers: Record<string, string> = {},
): Promise<{ bytes: Uint8Array; contentType?: string }> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ValidationError(`${url.slice(0, 200)} is not a URL`);
  }
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
    throw new ValidationError(`${parsed.protocol} URLs are not fetched: give an http or https URL`);
  const response = await fetchImpl(parsed.href, {
    redirect: "manual",
    signal: AbortSignal.timeout(30_000),
    headers: { accept: "text/markdown, text/html, text/plain, application/pdf;q=0.9, */*;q=0.1", ...headers },
  }).catch((e: unknown) => {
    if (isArborError(e)) throw e; // the guard's refusal says why itself
    throw new ValidationError(`${parsed.href} could not be fetched: ${(e as Error).message}`);
  });
  if (response.status >= 300 && response.status < 400) {
    await response.body?.cancel().catch(() => undefined);
    throw new ValidationError(
      `${parsed.href} redirects to ${response.headers.get("location") ?? "elsewhere"}: add the final URL`,
    );
  }
  if (!response.ok) {
    await response.body?.cancel().catch(() => undefined);
    throw new ValidationError(`${parsed.href} answered HTTP ${response.status}`);
  }
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > DOCUMENT_LIMITS.bytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge(parsed.href);
  }
  const chunks: Uint8Array[] = [];
  let seen = 0;
  const reader = response.body?.getReader();
  for (;;) {
    const next = await reader?.read();
    if (!next || next.done) break;
    seen += next.value.byteLength;
    if (seen > DOCUMENT_LIMITS.bytes) {
      await reader?.cancel().catch(() => undefined);
      throw tooLarge(parsed.href);
    }
    chunks.push(next.value);
  }
  const contentType = response.headers.get("content-type") ?? undefined;
  return { bytes: Buffer.concat(chunks), ...(contentType ? { contentType } : {}) };
}

const tooLarge = (url: string) =>
  new TooLargeError(`${url} is larger than ${DOCUMENT_LIMITS.bytes} bytes, the most a document may have`);
