import type { Context } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { type ConsoleSession, csrfMatches } from "./sessions.ts";

/**
 * The console session's cookie, and the checks every change made with it passes. The cookie is
 * `__Host-arbor_session`: HttpOnly (no script reads it), Secure, SameSite=Strict, for the whole
 * origin and no other (the __Host- prefix), so the HTTP API's routes take it too: the console's
 * scripts call /v1 as any client does, and the API checks, limits and logs them alike.
 *
 * A browser sends a cookie with requests another site makes it send, so a change (any method but
 * GET, HEAD or OPTIONS) made with the cookie must also carry the session's CSRF token, which only
 * the console's own pages hold (X-Arbor-CSRF, or the form field `csrf`), and must not come from
 * another site (Sec-Fetch-Site). A key in an Authorization header needs neither: a browser never
 * adds one by itself.
 */
export const SESSION_COOKIE = "arbor_session";
export const CSRF_HEADER = "x-arbor-csrf";

export const sessionToken = (c: Context): string | undefined => getCookie(c, SESSION_COOKIE, "host");

export function setSessionCookie(c: Context, token: string, maxAgeSeconds: number): void {
  setCookie(c, SESSION_COOKIE, token, {
    prefix: "host",
    path: "/",
    httpOnly: true,
    secure: true,
    sameSite: "Strict",
    maxAge: Math.max(0, Math.floor(maxAgeSeconds)),
  });
}

export function clearSessionCookie(c: Context): void {
  deleteCookie(c, SESSION_COOKIE, { prefix: "host", path: "/", secure: true });
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** Whether another site made the browser send this request (Sec-Fetch-Site says so; absent: not a browser that says). */
export function fromAnotherSite(c: Context): boolean {
  const site = c.req.header("sec-fetch-site");
  return site !== undefined && site !== "same-origin" && site !== "none";
}

/**
 * Why a request made with a session may not change anything, or undefined when it may: safe
 * methods always may; a change needs the session's CSRF token (`sent`: the header's, or a form's
 * field) and must not come from another site.
 */
export function csrfRefusal(c: Context, session: ConsoleSession, sent?: string): string | undefined {
  if (SAFE.has(c.req.method)) return undefined;
  if (fromAnotherSite(c)) return "A change sent by another site with your console session is refused";
  if (!csrfMatches(session, sent ?? c.req.header(CSRF_HEADER)))
    return "This change lacks the console's CSRF token (X-Arbor-CSRF): reload the console page and try again";
  return undefined;
}
