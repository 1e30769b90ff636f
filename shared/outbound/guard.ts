import { lookup as dnsLookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";
import type { Dispatcher, fetch as UndiciFetch } from "undici";
import { injectTraceHeaders, tracingOn } from "../kernel/tracing.ts";
import { parseIp } from "./addresses.ts";
import { boundedBody } from "./bounded-body.ts";
import { OutboundRefusedError, ResponseTooLargeError } from "./errors.ts";
import { addressRefusal, type OutboundPolicy, portAllowed } from "./policy.ts";

/**
 * The outbound guard: the one `fetch` for every URL Arbor calls out to (HTTP tools, the
 * `http_request` built-in, MCP over HTTP, A2A cards and calls; the webhook and push deliveries
 * take it too). ARCHITECTURE's invariant "every URL Arbor calls passes one outbound guard" is
 * this function; the composition roots hand it to the tool service as its `fetch`.
 *
 * For each request it
 *   1. takes http and https only (https only when the policy says so), and ports 80, 443 and the
 *      operator's; a URL with credentials in it is refused;
 *   2. checks the address at connect time: the connection's own DNS lookup is the guard's
 *      (undici `Agent` with a `connect.lookup`), so the address checked is the address connected
 *      to: no second resolution a rebinding DNS server could answer differently. The Host header
 *      and the TLS server name stay the URL's name. An address in the URL is checked before the
 *      request (a literal is never looked up). Loopback, link-local, private, CGNAT, unique-local,
 *      multicast, reserved and metadata addresses, and IPv6 forms that carry one of them, are
 *      refused unless the operator allows them (policy.ts). A name with several addresses is
 *      connected only to those allowed; with none allowed, the call is refused;
 *   3. follows no redirect: a 3xx with a Location is a refusal naming where it pointed. Following
 *      hop by hop would re-check each address, but would also carry the caller's headers (an API
 *      key) to wherever the first host sends them; the operator configures the final URL instead;
 *   4. reads the body with a bound (bounded-body.ts): past `maxResponseBytes` reading stops, the
 *      connection is closed, and the body's reader gets ResponseTooLargeError.
 * A refusal is an OutboundRefusedError thrown by the call (not fetch's bare "fetch failed").
 */
export type Resolver = (hostname: string) => Promise<readonly { address: string; family: number }[]>;

export interface GuardOptions {
  /** How names are resolved (default: the system's, `dns.lookup` with every answer); tests inject DNS here. */
  resolve?: Resolver;
}

const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const NULL_BODY = new Set([101, 204, 205, 304]);

/** The URL's problem for the policy before any connection (scheme, port, a literal address), if any. */
export function urlRefusal(policy: OutboundPolicy, url: URL): string | undefined {
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return `${url.protocol} URLs are not called out to: only http and https`;
  if (policy.httpsOnly && url.protocol !== "https:")
    return "plain http is refused: the operator allows https only (ARBOR_OUTBOUND_HTTPS_ONLY)";
  if (url.username || url.password) return "a URL with credentials in it is refused: send them as a header";
  const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  if (!portAllowed(policy, port))
    return `port ${port} is refused: Arbor calls ports 80 and 443, and those the operator adds (ARBOR_OUTBOUND_PORTS)`;
  const literal = parseIp(url.hostname);
  return literal ? addressRefusal(policy, url.hostname, literal) : undefined;
}

/** A DNS lookup for net.connect that answers only with addresses the policy lets through. */
export function guardedLookup(policy: OutboundPolicy, resolve: Resolver): LookupFunction {
  return (hostname, options, callback) => {
    const answer = async () => {
      const found = await resolve(hostname);
      const family = options.family === 4 || options.family === 6 ? options.family : undefined;
      const wanted = found.filter((a) => family === undefined || a.family === family);
      const refusals: string[] = [];
      const allowed = wanted.filter((a) => {
        const ip = parseIp(a.address);
        const why = ip ? addressRefusal(policy, hostname, ip) : `${a.address} is not an address`;
        if (why) refusals.push(why);
        return why === undefined;
      });
      if (allowed.length === 0)
        throw new OutboundRefusedError(
          refusals[0] ?? `${hostname} resolves to no address${family ? ` of IPv${family}` : ""}`,
          { hostname, addresses: wanted.map((a) => a.address) },
        );
      return allowed.map((a) => ({ address: a.address, family: a.family }));
    };
    answer().then(
      (addresses) => {
        if (options.all) callback(null, addresses);
        else {
          const first = addresses[0] as { address: string; family: number };
          callback(null, first.address, first.family);
        }
      },
      (error: NodeJS.ErrnoException) => callback(error, ""),
    );
  };
}

/** A `fetch` that passes every request through the guard of `policy`. */
export function createGuardedFetch(policy: OutboundPolicy, options: GuardOptions = {}): typeof fetch {
  // undici is loaded on the first call: most runs call nothing out, and its weight stays out of them.
  let client: Promise<{ fetch: typeof UndiciFetch; dispatcher: Dispatcher }> | undefined;
  const connect = () => {
    client ??= import("./undici.ts").then((undici) => ({
      fetch: undici.fetch,
      dispatcher: new undici.Agent({
        connect: { lookup: guardedLookup(policy, options.resolve ?? systemResolver) },
      }),
    }));
    return client;
  };
  const guarded = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = input instanceof Request ? input : undefined;
    const url = new URL(request ? request.url : String(input));
    const shown = `${url.origin}${url.pathname}`;
    const refused = urlRefusal(policy, url);
    if (refused)
      throw new OutboundRefusedError(`outbound call to ${shown} refused: ${refused}`, { url: shown });

    const abort = new AbortController();
    const callerSignal = init?.signal ?? request?.signal;
    const signal = callerSignal ? AbortSignal.any([callerSignal, abort.signal]) : abort.signal;
    const body = init?.body ?? request?.body ?? null;
    const given = init?.headers ?? request?.headers;
    // The call is in the request's trace: tools, MCP over HTTP, A2A agents, webhooks get `traceparent`.
    let headers = given;
    if (tracingOn()) {
      const traced = new Headers(given as ConstructorParameters<typeof Headers>[0]);
      injectTraceHeaders(traced);
      headers = traced;
    }
    const { fetch: undiciFetch, dispatcher } = await connect();
    let response: Awaited<ReturnType<typeof UndiciFetch>>;
    try {
      response = await undiciFetch(url, {
        method: init?.method ?? request?.method ?? "GET",
        // The global fetch's types and the undici package's describe the same shapes.
        ...(headers ? { headers: headers as never } : {}),
        ...(body !== null ? { body: body as never, duplex: "half" } : {}),
        redirect: "manual",
        signal,
        dispatcher,
      });
    } catch (error) {
      throw refusalIn(error, shown) ?? error;
    }

    if (REDIRECTS.has(response.status)) {
      const location = response.headers.get("location");
      await response.body?.cancel().catch(() => undefined);
      throw new OutboundRefusedError(
        `outbound call to ${shown} refused: it answered HTTP ${response.status}, a redirect` +
          `${location ? ` to ${location}` : ""}, and Arbor follows no redirects (configure the final URL)`,
        { url: shown, status: response.status, ...(location ? { location } : {}) },
      );
    }
    const bounded =
      response.body && !NULL_BODY.has(response.status)
        ? boundedBody(response.body as ReadableStream<Uint8Array>, {
            limit: policy.maxResponseBytes,
            url: shown,
            contentLength: response.headers.get("content-length"),
            abort: (reason) => abort.abort(reason),
          })
        : null;
    const out = new Response(bounded, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers as unknown as Headers,
    });
    Object.defineProperty(out, "url", { value: response.url });
    return out;
  };
  return guarded as typeof fetch;
}

/** The guard's own error inside fetch's "fetch failed" (a refused lookup surfaces as its cause). */
function refusalIn(error: unknown, url: string): Error | undefined {
  let e: unknown = error;
  for (let depth = 0; e instanceof Error && depth < 5; depth++) {
    if (e instanceof OutboundRefusedError)
      return new OutboundRefusedError(`outbound call to ${url} refused: ${e.message}`, {
        url,
        ...e.details,
      });
    if (e instanceof ResponseTooLargeError) return e;
    e = e.cause;
  }
  return undefined;
}

/**
 * Why a URL would be refused now, or undefined: its scheme, port, and the addresses its name
 * resolves to, checked ahead of any call. For URLs that are registered to be called later (a
 * webhook or push URL), so a bad one is refused when it is given; the check at connect time still
 * decides each call (a name may resolve elsewhere by then).
 */
export async function outboundRefusal(
  policy: OutboundPolicy,
  url: string | URL,
  options: GuardOptions = {},
): Promise<string | undefined> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `${String(url)} is not a URL`;
  }
  const early = urlRefusal(policy, u);
  if (early || parseIp(u.hostname)) return early;
  let found: readonly { address: string }[];
  try {
    found = await (options.resolve ?? systemResolver)(u.hostname);
  } catch (error) {
    return `${u.hostname} does not resolve (${(error as Error).message})`;
  }
  const refusals = found.map((a) => {
    const ip = parseIp(a.address);
    return ip ? addressRefusal(policy, u.hostname, ip) : `${a.address} is not an address`;
  });
  const allowed = refusals.some((r) => r === undefined);
  return allowed ? undefined : (refusals[0] ?? `${u.hostname} resolves to no address`);
}
