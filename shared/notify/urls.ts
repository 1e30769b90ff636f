import { type Ip, parseIp } from "../outbound/addresses.ts";
import { createGuardedFetch, type GuardOptions, urlRefusal } from "../outbound/guard.ts";
import {
  addressRefusal,
  DEFAULT_OUTBOUND,
  type OutboundSettings,
  outboundPolicy,
} from "../outbound/policy.ts";

/**
 * Where notifications may go: through the outbound guard (shared/outbound/guard.ts), stricter than
 * for tools. How to drive it:
 *
 *   const urls = notifyUrls(config.outbound, { allowLoopbackHttp: config.notify?.allowLoopbackHttp });
 *   urls.refusal(url)        // why a webhook URL is refused when it is given (a 400), or undefined
 *   urls.fetch(url, init)    // the guarded fetch every delivery attempt goes through
 *
 *   - https only: plain http is refused, whatever ARBOR_OUTBOUND_HTTPS_ONLY says;
 *   - loopback (127.0.0.0/8, ::1, `localhost`), over http or https and on any port, only when the
 *     operator turns on ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP (development: a receiver on this machine);
 *   - everything else as the guard has it: no credentials in the URL, port 443 and the webhook
 *     ports (ARBOR_WEBHOOK_PORTS), public addresses and those allowed for webhooks
 *     (ARBOR_WEBHOOK_ALLOW; the tools' ARBOR_OUTBOUND_ALLOW and ARBOR_OUTBOUND_PORTS never apply:
 *     opening a local tool's port must not open it to every tenant's callbackUrl), checked again at
 *     connect time against the address actually connected to (a name resolving to a private,
 *     loopback or metadata address, an IPv6 address embedding one, fails the attempt), no
 *     redirects (a 3xx is a refusal), a bounded response (ARBOR_OUTBOUND_MAX_RESPONSE_BYTES).
 * `refusal` checks the URL alone (scheme, credentials, port, a literal address, a loopback name
 * such as `localhost`), not DNS: a name
 * resolving somewhere refused fails at send, and its delivery dead-letters.
 */
export interface NotifyUrls {
  refusal(url: string): string | undefined;
  fetch: typeof fetch;
}

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);
const LOOPBACK = parseIp("127.0.0.1") as Ip;

/** A URL's host is loopback by its own text (a literal, or `localhost`): nothing is resolved. */
export function isLoopbackUrl(url: URL): boolean {
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  return (
    LOOPBACK_NAMES.has(host) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host.endsWith(".localhost")
  );
}

export interface NotifyReach {
  allowLoopbackHttp?: boolean | undefined;
  /** ARBOR_WEBHOOK_ALLOW */
  allow?: readonly string[] | undefined;
  /** ARBOR_WEBHOOK_PORTS */
  ports?: readonly string[] | undefined;
  guard?: GuardOptions;
}

export function notifyUrls(
  settings: OutboundSettings = DEFAULT_OUTBOUND,
  options: NotifyReach = {},
): NotifyUrls {
  // Only the response bound is shared with the tools' settings.
  const own: OutboundSettings = {
    allow: options.allow ?? [],
    ports: options.ports ?? [],
    httpsOnly: true,
    maxResponseBytes: settings.maxResponseBytes,
  };
  const strict = outboundPolicy(own);
  const loopback = outboundPolicy({
    ...own,
    httpsOnly: false,
    allow: ["127.0.0.0/8", "::1/128", "localhost", "*.localhost"],
    ports: ["1-65535"],
  });
  const strictFetch = createGuardedFetch(strict, options.guard);
  const loopbackFetch = createGuardedFetch(loopback, options.guard);
  const pick = (u: URL) => (options.allowLoopbackHttp === true && isLoopbackUrl(u) ? "loopback" : "strict");

  const refusal = (url: string): string | undefined => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return `${url} is not an absolute URL: give https://host/path`;
    }
    if (pick(u) === "loopback") return urlRefusal(loopback, u);
    const why = urlRefusal(strict, u);
    // `localhost` and `*.localhost` are loopback by definition (RFC 6761): refused now, as a literal
    // 127.0.0.1 is, rather than at each attempt until the delivery is dead (unless the operator allows the name).
    if (why === undefined && isLoopbackUrl(u) && addressRefusal(strict, u.hostname, LOOPBACK) !== undefined)
      return (
        `${u.hostname} is a loopback name, a receiver on Arbor's own machine: refused ` +
        "(a loopback receiver needs ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP=true, for development)"
      );
    if (why?.startsWith("plain http is refused"))
      return (
        "plain http is refused: webhook URLs must be https" +
        (isLoopbackUrl(u)
          ? " (a loopback receiver needs ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP=true, for development)"
          : "")
      );
    return why;
  };
  const guarded = ((input: string | URL | Request, init?: RequestInit) => {
    const u = new URL(input instanceof Request ? input.url : String(input));
    return pick(u) === "loopback" ? loopbackFetch(input, init) : strictFetch(input, init);
  }) as typeof fetch;
  return { refusal, fetch: guarded };
}
