import {
  type Logger,
  LogLevel,
  WebAPIHTTPError,
  WebAPIPlatformError,
  WebAPIRateLimitedError,
  WebAPIRequestError,
  WebClient,
} from "@slack/web-api";
import { ChatSendError } from "../../../notify/chat/types.ts";

/**
 * The official Web API client (`@slack/web-api`), made the way every Slack call here wants it.
 * How to drive it:
 *
 *   const client = slackClient(botToken, apiUrl, { timeoutMs: 10_000 });
 *   await client.chat.postMessage({ channel, thread_ts, text, blocks });
 *   catch (e) { throw toChatSendError(e, "chat.postMessage") }   // retry or dead, as the sync wants
 *
 * No retries inside the client (the notify path retries a delivery with its own backoff, and the
 * routes must answer within Slack's 3 s), rate limits rejected at once with their Retry-After, and
 * a logger that says nothing: the client's debug lines would carry request bodies, and the token
 * must never reach a log. Clients are kept per token and URL (a rotated token gets a new one).
 */
const quiet: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  setLevel: () => undefined,
  getLevel: () => LogLevel.ERROR,
  setName: () => undefined,
};

const clients = new Map<string, WebClient>();
const MAX_CLIENTS = 200;

export function slackClient(token: string, apiUrl: string, options: { timeoutMs: number }): WebClient {
  const id = `${apiUrl}\u0000${options.timeoutMs}\u0000${token}`;
  const known = clients.get(id);
  if (known) return known;
  const client = new WebClient(token, {
    slackApiUrl: apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/`,
    retryConfig: { retries: 0 },
    rejectRateLimitedCalls: true,
    timeout: options.timeoutMs,
    logger: quiet,
    logLevel: LogLevel.ERROR,
    allowAbsoluteUrls: false,
  });
  if (clients.size >= MAX_CLIENTS) clients.clear();
  clients.set(id, client);
  return client;
}

/**
 * Platform errors worth trying again (Slack's side had a problem). Any other (channel_not_found,
 * not_in_channel, account_inactive, invalid_auth, token_revoked, invalid_blocks...) will not get
 * better by itself: the delivery ends dead, for an operator to see.
 */
const RETRYABLE = new Set(["internal_error", "fatal_error", "service_unavailable", "request_timeout"]);

/** A failed Slack call as the thread sync reads it: retryable or not, and when to try again. */
export function toChatSendError(error: unknown, call: string): ChatSendError {
  if (error instanceof ChatSendError) return error;
  if (error instanceof WebAPIRateLimitedError)
    return new ChatSendError(`Slack rate-limited ${call}: try again in ${error.retryAfter} s`, {
      retryable: true,
      retryAfterMs: error.retryAfter * 1000,
      cause: error,
    });
  if (error instanceof WebAPIPlatformError) {
    const code = error.data.error;
    if (code === "ratelimited") {
      const after = error.data.response_metadata?.retryAfter;
      return new ChatSendError(`Slack rate-limited ${call}`, {
        retryable: true,
        ...(after !== undefined ? { retryAfterMs: after * 1000 } : {}),
        cause: error,
      });
    }
    return new ChatSendError(`Slack refused ${call}: ${code}`, {
      retryable: RETRYABLE.has(code),
      // chat.update of a message someone deleted: the sync posts it anew.
      ...(code === "message_not_found" ? { gone: true } : {}),
      cause: error,
    });
  }
  if (error instanceof WebAPIHTTPError)
    return new ChatSendError(`Slack answered ${call} with HTTP ${error.statusCode}`, {
      retryable: error.statusCode >= 500 || error.statusCode === 408,
      cause: error,
    });
  if (error instanceof WebAPIRequestError)
    return new ChatSendError(`Slack could not be reached for ${call} (${error.original.message})`, {
      retryable: true,
      cause: error,
    });
  return new ChatSendError(`${call} failed: ${(error as Error)?.message ?? String(error)}`, {
    retryable: true,
    cause: error,
  });
}
