import type { Engine } from "../../engine/engine.ts";
import { ERROR_EDGES } from "../../kernel/error-edges.ts";
import { type ErrorCode, isArborError } from "../../kernel/errors.ts";
import type { ChatSettingsSource } from "../../notify/chat/types.ts";
import type { NotifyService } from "../../notify/service.ts";

/**
 * What a chat channel's routes are made from (slackRoutes, teamsRoutes): the engine's entry points
 * (submit with an idempotency key, respond, cancel, reads), the notify service (subscribe the
 * thread), the settings, and the clock (signature windows, token expiry: tests move it).
 */
export interface ChatRouteParts {
  engine: Engine;
  notify: NotifyService;
  settings: ChatSettingsSource;
  clock?: () => Date;
  /** Outbound fetch for what a channel fetches itself (the Teams signing keys); default: global fetch. */
  fetch?: typeof fetch;
}

/** What a person is told when Arbor cannot take their request now but may in a moment. */
export const BUSY_TEXT =
  "Arbor cannot take this right now (it is busy, or its storage does not answer): try again in a minute.";

/**
 * What a person in a chat is told of an error, by its row in kernel/error-edges.ts (the same rows
 * the HTTP API and A2A answer by), or undefined: the route throws it (logged; a 5xx, the
 * platform's own failure notice).
 *   - shown and not retryable (their mistake, a refusal, a question answered already): its message;
 *   - retryable (throttled, unavailable): BUSY_TEXT, never the backend's message; or undefined when
 *     `platformRetries` (Teams activities, Slack events are sent again after a 5xx, and then go through);
 *   - anything else (configuration, internal, not an ArborError): undefined; nothing internal reaches a person.
 */
export function chatReply(
  error: unknown,
  platformRetries: boolean,
): { code: ErrorCode; text: string; retryable: boolean } | undefined {
  if (!isArborError(error)) return undefined;
  const { shown, retryable } = ERROR_EDGES[error.code];
  if (!shown || (retryable && platformRetries)) return undefined;
  return { code: error.code, text: retryable ? BUSY_TEXT : error.message, retryable };
}
