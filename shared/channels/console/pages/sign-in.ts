import { barePage, CONSOLE, type Html, html, notice } from "../html.ts";

/**
 * The sign-in page: an API key, sent once in a POST body (never in a URL), exchanged for a session.
 * `next` is where to go after (a console path; anything else goes to the front page).
 */
export function signInPage(options: { next: string; problem?: string; plainHttp?: boolean }): Html {
  return barePage(
    "Sign in",
    html`<h1>Arbor</h1>
<form class="sign-in" method="post" action="${CONSOLE}/login">
  <p>Sign in with an API key of yours. The console keeps a session for 8 hours; the key is not kept in this browser.</p>
  ${options.problem ? notice("error", options.problem) : ""}
  ${
    options.plainHttp
      ? notice(
          "info",
          "This page came over plain HTTP from another machine: the browser will not keep the session's Secure cookie. Open the console over HTTPS, or on this machine at http://127.0.0.1.",
        )
      : ""
  }
  <label for="key">API key</label>
  <input id="key" name="key" type="password" autocomplete="off" required maxlength="600" autofocus>
  <input type="hidden" name="next" value="${options.next}">
  <button type="submit" class="primary">Sign in</button>
  <p class="muted">No key yet? <code>npx arbor keys add --id user_&lt;your-name&gt;</code> prints one.</p>
</form>`,
  );
}

/** A console path to go to after signing in: only this console's own pages (never another site). */
export function safeNext(next: string | undefined): string {
  if (!next?.startsWith(`${CONSOLE}`) || /[\\\s]|\/\.\.?(\/|$|\?)/.test(next)) return CONSOLE;
  const rest = next.slice(CONSOLE.length);
  return rest === "" || rest.startsWith("/") || rest.startsWith("?") ? next : CONSOLE;
}
