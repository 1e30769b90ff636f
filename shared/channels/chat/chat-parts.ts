import type { Engine } from "../../engine/engine.ts";
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
