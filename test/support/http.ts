import { request } from "node:http";

/**
 * An answer of Arbor's API as the tests read it: the status and the body as JSON, and the headers
 * (not enumerable: two answers are equal when their status and body are, whatever their Date).
 */
export interface ApiAnswer<T> {
  status: number;
  /** The body parsed (undefined when it is empty); a body that is not JSON fails the call. */
  json: T;
  readonly headers: Headers;
}

/**
 * One call to Arbor's API at `base` (a server's URL): `key` as the bearer token, `body` as JSON
 * (a string or a stream sent as it is, all three as application/json), `headers` added last.
 */
export async function fetchApi<T>(
  base: string,
  method: string,
  path: string,
  key?: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<ApiAnswer<T>> {
  const init: RequestInit & { duplex?: "half" } = {
    method,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
  };
  if (body instanceof ReadableStream) {
    init.body = body;
    init.duplex = "half";
  } else if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const res = await fetch(`${base}${path}`, init);
  const text = await res.text();
  const answer = { status: res.status, json: (text ? JSON.parse(text) : undefined) as T };
  return Object.defineProperty(answer, "headers", { value: res.headers, enumerable: false }) as ApiAnswer<T>;
}

/** A GET with whatever Host header it is given (fetch does not let a caller set one). */
export function getWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "GET", headers: { host } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}
