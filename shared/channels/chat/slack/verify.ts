import { createHmac, timingSafeEqual } from "node:crypto";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../../domain/input-limits.ts";
import { BodyTooLargeError, readBounded } from "../../http/http-read.ts";

/**
 * Slack's request signing, checked on the RAW body before anything is parsed or written
 * (https://api.slack.com/authentication/verifying-requests-from-slack). How to drive it:
 *
 *   const body = await readBody(c.req.raw, MAX_SLACK_BODY_BYTES);        // "too-large" past the limit
 *   const problem = verifySlackRequest(secret, headersOf(c), body, clock()); // undefined: it is Slack
 *   if (problem) return c.json({ error: problem }, 401);
 *   const payload = parseSlackJson(body);                                 // depth-checked JSON
 *
 * The signature is `v0=` + hex HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>` with the
 * app's signing secret, compared in constant time; the timestamp must lie within 300 s of our clock
 * either way (a replay of an old request, or one signed with a skewed clock, is refused).
 */
export const MAX_SLACK_BODY_BYTES = 256 * 1024;
export const SLACK_WINDOW_SECONDS = 300;

export interface SlackSignatureHeaders {
  timestamp: string | undefined;
  signature: string | undefined;
}

/** Why the request is not Slack's (a message for a 401), or undefined when it is. */
export function verifySlackRequest(
  signingSecret: string,
  headers: SlackSignatureHeaders,
  rawBody: string,
  now: Date,
): string | undefined {
  const { timestamp, signature } = headers;
  if (timestamp === undefined || signature === undefined)
    return "This endpoint takes requests from Slack only: X-Slack-Request-Timestamp and X-Slack-Signature are required";
  if (!/^\d{1,12}$/.test(timestamp))
    return "X-Slack-Request-Timestamp must be the request's time in whole seconds since 1970";
  const match = /^v0=([0-9a-f]{64})$/.exec(signature);
  if (!match) return "X-Slack-Signature must be v0=<64 hex digits>";
  const skew = Math.abs(Math.floor(now.getTime() / 1000) - Number(timestamp));
  if (skew > SLACK_WINDOW_SECONDS)
    return `The request's timestamp is ${skew} s from our clock (at most ${SLACK_WINDOW_SECONDS} s): a replay, or a clock to set right`;
  const expected = createHmac("sha256", signingSecret).update(`v0:${timestamp}:${rawBody}`).digest();
  const given = Buffer.from(match[1] as string, "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return "The request's signature does not match: check the app's signing secret in the settings";
  return undefined;
}

/** Signs a body as Slack does (the tests' and the fake Slack's side of the check above). */
export function signSlackBody(
  signingSecret: string,
  rawBody: string,
  timestampSeconds: number,
): { "x-slack-request-timestamp": string; "x-slack-signature": string } {
  const ts = String(timestampSeconds);
  const mac = createHmac("sha256", signingSecret).update(`v0:${ts}:${rawBody}`).digest("hex");
  return { "x-slack-request-timestamp": ts, "x-slack-signature": `v0=${mac}` };
}

/**
 * The body as text, read at most `limit` bytes: "too-large" once it passes them (the rest is not
 * read). Content-Length is believed only to refuse early; the bytes read are what count.
 */
export async function readBody(request: Request, limit: number): Promise<string | "too-large"> {
  try {
    return await readBounded(request, limit);
  } catch (e) {
    if (e instanceof BodyTooLargeError) return "too-large";
    throw e;
  }
}

/** A JSON body Slack sent, or why not (not JSON; nests deeper than any Slack payload does). */
export function parseSlackJson(text: string): { ok: true; value: unknown } | { ok: false; problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, problem: `The body is not valid JSON (${(e as Error).message})` };
  }
  if (nestsDeeperThan(value, MAX_JSON_DEPTH))
    return { ok: false, problem: `The body nests deeper than ${MAX_JSON_DEPTH} levels` };
  return { ok: true, value };
}
