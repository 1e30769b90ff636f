import { RequestMalformedError } from "@a2a-js/sdk/errors";
import { MAX_JSON_DEPTH, MAX_MESSAGE_PARTS, nestsDeeperThan } from "../domain/input-limits.ts";
import { isWithin, tenantUrn } from "../domain/urn.ts";

/**
 * What an A2A request must be before the SDK reads it: the SDK's JSON decoding is lenient (a
 * text part `{"text": 5}` becomes "5", a part that is null throws), and by the time Arbor sees the
 * decoded message what was sent is lost. So the raw JSON-RPC request is checked here, fully and
 * before anything is read or written, with the limits every channel keeps (domain/input-limits.ts):
 *   - no JSON nests deeper than MAX_JSON_DEPTH (a data part 5,000 levels deep is refused, not a crash);
 *   - a message's contextId of another tenant is a conversation that does not exist (checked first,
 *     so that the rest of the body cannot tell what exists there);
 *   - parts: an array of 1 to MAX_MESSAGE_PARTS objects, each with exactly one content (`text` a
 *     string; `data` any JSON but null; `raw`, `url` strings, refused later as unsupported), and
 *     `mediaType`, `filename` strings, `metadata` an object when present.
 * The rendered text's length (MAX_REQUEST_CHARS) is checked where the parts are rendered
 * (requestText). Returns the error to answer with, or undefined.
 */
export function checkA2aRequest(body: Record<string, unknown>, tenant: string): Error | undefined {
  if (nestsDeeperThan(body, MAX_JSON_DEPTH))
    return new RequestMalformedError(`The request nests deeper than ${MAX_JSON_DEPTH} levels`);
  if (body.method !== "SendMessage" && body.method !== "SendStreamingMessage") return undefined;
  const message = (body.params as { message?: unknown } | undefined)?.message;
  if (typeof message !== "object" || message === null) return undefined; // the SDK says it is required
  const m = message as Record<string, unknown>;
  const contextId = m.contextId ?? m.context_id;
  if (
    typeof contextId === "string" &&
    contextId.startsWith("cld:") &&
    !isWithin(contextId, tenantUrn(tenant))
  )
    return new RequestMalformedError(
      `No conversation ${contextId} for this caller: omit contextId to start a new one`,
    );
  const problem = partsProblem(m.parts);
  return problem ? new RequestMalformedError(`Invalid message parts: ${problem}`) : undefined;
}

const CONTENTS = ["text", "data", "raw", "url"] as const;

function partsProblem(parts: unknown): string | undefined {
  if (!Array.isArray(parts) || parts.length === 0)
    return "message.parts must be a non-empty array (a text part at least)";
  if (parts.length > MAX_MESSAGE_PARTS) return `at most ${MAX_MESSAGE_PARTS} parts`;
  for (const [i, part] of parts.entries()) {
    const at = `parts[${i}]`;
    if (typeof part !== "object" || part === null || Array.isArray(part)) return `${at} must be an object`;
    const p = part as Record<string, unknown>;
    const present = CONTENTS.filter((k) => p[k] !== undefined && p[k] !== null);
    if (present.length !== 1)
      return `${at} must have exactly one of ${CONTENTS.join(", ")}${present.length ? ` (it has ${present.join(", ")})` : ""}`;
    const [content] = present as [(typeof CONTENTS)[number]];
    if (content !== "data" && typeof p[content] !== "string") return `${at}.${content} must be a string`;
    for (const field of ["mediaType", "media_type", "filename"])
      if (p[field] !== undefined && typeof p[field] !== "string") return `${at}.${field} must be a string`;
    const metadata = p.metadata;
    if (
      metadata !== undefined &&
      (typeof metadata !== "object" || metadata === null || Array.isArray(metadata))
    )
      return `${at}.metadata must be an object`;
  }
  return undefined;
}
