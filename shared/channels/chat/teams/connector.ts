import {
  ChatSendError,
  type ChatSettingsSource,
  type TeamsSettings,
  type TeamsThread,
} from "../../../notify/chat/types.ts";
import { OutboundRefusedError } from "../../../outbound/errors.ts";
import { fetchWithTimeout, readBounded } from "../../http/http-read.ts";
import { serviceUrlAllowed } from "./activity.ts";

/**
 * Arbor's own client for the Bot Connector REST API (v3), the few calls the Teams surface makes.
 * How to drive it:
 *
 *   const connector = new BotConnector(settingsSource, { fetch: guardedFetch, clock });
 *   const id = await connector.send(thread, { type: "message", text, attachments });  // POST
 *   await connector.send(thread, activity, id);                                        // PUT: replace it
 *
 * Arbor's token comes from the client-credentials grant (the app id and password of the
 * settings, scope `https://api.botframework.com/.default`) at `settings.tokenUrl`, or else the
 * Entra token endpoint of `appTenantId` (`botframework.com` for a multi-tenant bot); it is kept
 * until 5 minutes before it expires, and fetched again once when the connector answers 401.
 * Before every call the thread's service URL is checked against `allowedServiceUrls` again (the
 * settings may have changed since it was subscribed); every call goes through the given fetch
 * (the outbound guard) with a timeout, and its answer is read with a bound.
 *
 * Failures are ChatSendError: 429 (after its Retry-After), 5xx, a timeout or a network error are
 * retryable; 401 after a fresh token, 403, 404 and the other 4xx, a service URL not allowed, Teams
 * not configured, are not (the delivery ends dead, visible to operators).
 */
export const BOT_SCOPE = "https://api.botframework.com/.default";
const EXPIRY_MARGIN_MS = 5 * 60_000;
const RESPONSE_LIMIT = 64 * 1024;

export interface ConnectorOptions {
  /** The outbound guard's fetch. */
  fetch: typeof fetch;
  clock?: () => Date;
  /** How long one call may take (default 10 s). */
  timeoutMs?: number;
}

export interface OutgoingActivity {
  type: "message";
  text: string;
  attachments?: unknown[];
  [key: string]: unknown;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

export const tokenUrlOf = (s: TeamsSettings) =>
  s.tokenUrl ??
  `https://login.microsoftonline.com/${encodeURIComponent(s.appTenantId ?? "botframework.com")}/oauth2/v2.0/token`;

const retryAfterMs = (header: string | null, now: number): number | undefined => {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, Math.min(seconds, 3600)) * 1000;
  const at = Date.parse(header);
  return Number.isFinite(at) ? Math.max(0, Math.min(at - now, 3_600_000)) : undefined;
};

export class BotConnector {
  readonly #settings: ChatSettingsSource;
  readonly #fetch: typeof fetch;
  readonly #clock: () => Date;
  readonly #timeoutMs: number;
  /** Tokens by app id and token URL (a rotated secret under the same app keeps its token until it expires). */
  readonly #tokens = new Map<string, CachedToken>();
  readonly #pending = new Map<string, Promise<CachedToken>>();

  constructor(settings: ChatSettingsSource, options: ConnectorOptions) {
    this.#settings = settings;
    this.#fetch = options.fetch;
    this.#clock = options.clock ?? (() => new Date());
    this.#timeoutMs = options.timeoutMs ?? 10_000;
  }

  /** Posts `activity` in the thread (returns its id), or replaces the activity `replace` with it. */
  async send(thread: TeamsThread, activity: OutgoingActivity, replace?: string): Promise<string> {
    const settings = (await this.#settings())?.teams;
    if (!settings)
      // Retried, as for Slack: the settings may be back in a moment; if not, dead when retries run out.
      throw new ChatSendError("Teams is not configured (no teams settings now)", { retryable: true });
    if (!serviceUrlAllowed(thread.serviceUrl, settings.allowedServiceUrls))
      throw new ChatSendError(`The service URL ${thread.serviceUrl} is not an allowed one`, {
        retryable: false,
      });
    const base = `${thread.serviceUrl.replace(/\/+$/, "")}/v3/conversations/${encodeURIComponent(thread.conversationId)}/activities`;
    const url = replace
      ? `${base}/${encodeURIComponent(replace)}`
      : thread.replyToId
        ? `${base}/${encodeURIComponent(thread.replyToId)}`
        : base;
    const body = {
      ...activity,
      ...(replace ? { id: replace } : {}),
      ...(thread.replyToId && !replace ? { replyToId: thread.replyToId } : {}),
    };
    const what = `${replace ? "PUT" : "POST"} ${replace ? "activity update" : "activity"}`;
    let res = await this.#call(settings, replace ? "PUT" : "POST", url, body, false);
    if (res.status === 401) {
      await res.body?.cancel().catch(() => undefined);
      res = await this.#call(settings, replace ? "PUT" : "POST", url, body, true);
    }
    const status = res.status;
    let text = "";
    try {
      text = await readBounded(res, RESPONSE_LIMIT);
    } catch {
      text = "";
    }
    if (status === 429 || status >= 500)
      throw new ChatSendError(`The Bot Connector answered ${status} to ${what}`, {
        retryable: true,
        ...(status === 429
          ? { retryAfterMs: retryAfterMs(res.headers.get("retry-after"), Date.now()) ?? 1000 }
          : {}),
      });
    if (status < 200 || status >= 300)
      throw new ChatSendError(`The Bot Connector answered ${status} to ${what}: ${text.slice(0, 200)}`, {
        retryable: false,
        // An update of an activity someone deleted: the sync posts it anew (a post that 404s stays dead).
        ...(replace && status === 404 ? { gone: true } : {}),
      });
    if (replace) return replace;
    let id: unknown;
    try {
      id = (JSON.parse(text) as { id?: unknown }).id;
    } catch {
      id = undefined;
    }
    if (typeof id !== "string" || !id)
      throw new ChatSendError("The Bot Connector's answer names no activity id", { retryable: true });
    return id;
  }

  async #call(settings: TeamsSettings, method: "POST" | "PUT", url: string, body: unknown, fresh: boolean) {
    const token = await this.#token(settings, fresh);
    try {
      return await fetchWithTimeout(
        this.#fetch,
        url,
        {
          method,
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json; charset=utf-8" },
          body: JSON.stringify(body),
        },
        this.#timeoutMs,
      );
    } catch (error) {
      // The outbound guard's refusal (possibly wrapped by fetch) will not change on a retry.
      const refused = [error, (error as { cause?: unknown }).cause].some(
        (e) => e instanceof OutboundRefusedError,
      );
      throw new ChatSendError(`The Bot Connector could not be reached: ${(error as Error).message}`, {
        retryable: !refused,
        cause: error,
      });
    }
  }

  async #token(settings: TeamsSettings, fresh: boolean): Promise<string> {
    const tokenUrl = tokenUrlOf(settings);
    const key = `${settings.appId}\u0000${tokenUrl}`;
    const cached = this.#tokens.get(key);
    const now = this.#clock().getTime();
    if (!fresh && cached && cached.expiresAt - EXPIRY_MARGIN_MS > now) return cached.token;
    if (fresh && cached) this.#tokens.delete(key);
    let pending = this.#pending.get(key);
    if (!pending) {
      pending = this.#fetchToken(settings, tokenUrl).finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
    }
    const got = await pending;
    this.#tokens.set(key, got);
    return got.token;
  }

  async #fetchToken(settings: TeamsSettings, tokenUrl: string): Promise<CachedToken> {
    const form = new URLSearchParams({
      grant_type: "client_credentials",
      client_id: settings.appId,
      client_secret: settings.appPassword,
      scope: BOT_SCOPE,
    });
    let res: Response;
    try {
      res = await fetchWithTimeout(
        this.#fetch,
        tokenUrl,
        {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: form.toString(),
        },
        this.#timeoutMs,
      );
    } catch (error) {
      throw new ChatSendError(`Arbor's Teams token could not be fetched: ${(error as Error).message}`, {
        retryable: true,
        cause: error,
      });
    }
    let parsed: { access_token?: unknown; expires_in?: unknown } = {};
    try {
      parsed = JSON.parse(await readBounded(res, RESPONSE_LIMIT)) as typeof parsed;
    } catch {
      parsed = {};
    }
    if (!res.ok || typeof parsed.access_token !== "string")
      throw new ChatSendError(
        `The token endpoint answered ${res.status}: check the Teams appId, appPassword and appTenantId`,
        { retryable: res.status === 429 || res.status >= 500 },
      );
    const seconds =
      typeof parsed.expires_in === "number" ? parsed.expires_in : Number(parsed.expires_in ?? 3600);
    return {
      token: parsed.access_token,
      expiresAt: this.#clock().getTime() + (Number.isFinite(seconds) ? seconds : 3600) * 1000,
    };
  }
}
