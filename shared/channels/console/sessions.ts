import { hash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Authenticated, KeyStore } from "../../ports/key-store.ts";
import type { StateStore } from "../../ports/state-store.ts";

/**
 * The console's sessions: an API key, given once on the sign-in page, exchanged for a random token
 * that the browser keeps in an HttpOnly cookie (the key itself is never stored in the browser).
 * A session is a record of the state store, so it works alike on `arbor serve` and behind API
 * Gateway (every function instance reads the same table), and signing out ends it everywhere.
 *
 *   const { token, session } = await sessions.open(keySha256, who);   // sign-in: Set-Cookie token
 *   const session = await sessions.check(token);                      // every request: or undefined
 *   await sessions.close(token);                                      // sign-out
 *
 * The record is `console-session#<sha256 of the token>` (the token is not stored: a copy of the
 * table signs nobody in), holding the key's sha256, the session's CSRF token and its end. Each
 * check looks the key up again (KeyStore.lookup, behind the key cache on AWS): a revoked key ends
 * its sessions, and a role taken away counts at once, as it does for the key. A session lasts
 * `ttlMs` from sign-in (8 hours by default), and the store forgets it after that (expiresAt).
 */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
const SESSION_KIND = "console-session";

export interface ConsoleSession {
  /** Who the session's key stands for now. */
  who: Authenticated;
  /** Sent back by the console's scripts and forms on every change (X-Arbor-CSRF, or a form field). */
  csrf: string;
  /** ISO 8601: when it ends. */
  expiresAt: string;
}

interface SessionData {
  keySha256: string;
  csrf: string;
  createdAt: string;
}

/** A token as `open` makes them: 32 random bytes, base64url. Anything else is not looked up. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export class ConsoleSessions {
  readonly #state: StateStore;
  readonly #keys: KeyStore;
  readonly #clock: () => Date;
  readonly #untilDurable: () => Promise<void>;
  readonly ttlMs: number;

  constructor(
    state: StateStore,
    keys: KeyStore,
    options: { clock?: () => Date; ttlMs?: number; untilDurable?: () => Promise<void> } = {},
  ) {
    this.#state = state;
    this.#keys = keys;
    this.#clock = options.clock ?? (() => new Date());
    this.#untilDurable = options.untilDurable ?? (() => Promise.resolve());
    this.ttlMs = options.ttlMs ?? SESSION_TTL_MS;
  }

  /** A new session for the key with `keySha256` (already authenticated as `who`). */
  async open(keySha256: string, who: Authenticated): Promise<{ token: string; session: ConsoleSession }> {
    const token = randomBytes(32).toString("base64url");
    const now = this.#clock();
    const expiresAt = new Date(now.getTime() + this.ttlMs).toISOString();
    const data: SessionData = {
      keySha256,
      csrf: randomBytes(32).toString("base64url"),
      createdAt: now.toISOString(),
    };
    await this.#state.transact([
      {
        op: "put",
        record: { key: recordKey(token), kind: SESSION_KIND, updatedAt: data.createdAt, expiresAt, data },
        expectedVersion: 0,
      },
    ]);
    await this.#untilDurable();
    return { token, session: { who, csrf: data.csrf, expiresAt } };
  }

  /** The session `token` stands for, or undefined: unknown, ended, or its key revoked. */
  async check(token: string | undefined): Promise<ConsoleSession | undefined> {
    if (token === undefined || !TOKEN.test(token)) return undefined;
    const record = await this.#state.get<SessionData>(recordKey(token));
    if (!record?.expiresAt || Date.parse(record.expiresAt) <= this.#clock().getTime()) return undefined;
    const who = await this.#keys.lookup(record.data.keySha256);
    return who ? { who, csrf: record.data.csrf, expiresAt: record.expiresAt } : undefined;
  }

  /** Ends the session (nothing when there is none). */
  async close(token: string | undefined): Promise<void> {
    if (token === undefined || !TOKEN.test(token)) return;
    const record = await this.#state.get(recordKey(token));
    if (!record) return;
    await this.#state
      .transact([{ op: "delete", key: record.key, expectedVersion: record.version }])
      .catch(() => undefined); // closed by a second tab at the same moment: closed all the same
    await this.#untilDurable();
  }
}

/** Whether `sent` is the session's CSRF token (compared in constant time). */
export function csrfMatches(session: ConsoleSession, sent: string | undefined): boolean {
  if (sent === undefined) return false;
  const a = Buffer.from(sent);
  const b = Buffer.from(session.csrf);
  return a.length === b.length && timingSafeEqual(a, b);
}

const recordKey = (token: string) => `${SESSION_KIND}#${hash("sha256", token)}`;
