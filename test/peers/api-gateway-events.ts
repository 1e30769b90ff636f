import { randomBytes } from "node:crypto";
import type { APIGatewayProxyEventV2 } from "../../functions/api.ts";

/**
 * API Gateway's HTTP API for tests: the payload format 2.0 events it hands to a Lambda
 * integration, built as API Gateway builds them (the path decoded in `rawPath`, lower-case
 * headers, the API's domain in the request context, `$default` stage, no authorizer).
 */
export const PUBLIC_URL = "https://abc123.execute-api.us-east-1.amazonaws.com";

export interface ApiEventOptions {
  key?: string;
  body?: unknown;
  headers?: Record<string, string>;
  base64?: boolean;
  /** A form's fields, sent urlencoded (as a browser posts a form) instead of a JSON body. */
  form?: Record<string, string>;
  /** The request's cookies: API Gateway hands them over apart, in `cookies`, not as a header. */
  cookies?: string[];
}

/** An HTTP API event (payload format 2.0) as API Gateway sends it to the integration. */
export function apiEvent(
  method: string,
  path: string,
  options: ApiEventOptions = {},
): APIGatewayProxyEventV2 {
  const [encodedPath = "", rawQueryString = ""] = path.split("?");
  // API Gateway's HTTP API decodes the path it hands over (rawPath and requestContext.http.path).
  const rawPath = decodeURIComponent(encodedPath);
  const text = options.form
    ? new URLSearchParams(options.form).toString()
    : options.body === undefined
      ? null
      : JSON.stringify(options.body);
  const type = options.form ? "application/x-www-form-urlencoded" : "application/json";
  const headers: Record<string, string> = {
    accept: "*/*",
    host: new URL(PUBLIC_URL).host,
    "user-agent": "curl/8.5.0",
    "x-amzn-trace-id": `Root=1-${randomBytes(12).toString("hex")}`,
    "x-forwarded-for": "198.51.100.7",
    "x-forwarded-port": "443",
    "x-forwarded-proto": "https",
    ...(text === null ? {} : { "content-type": type, "content-length": String(text.length) }),
    ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
    ...options.headers,
  };
  const routeKey = rawPath.startsWith("/v1/")
    ? "ANY /v1/{proxy+}"
    : rawPath.startsWith("/console/")
      ? `${method} /console/{proxy+}`
      : `${method} ${rawPath}`;
  const now = new Date();
  return {
    version: "2.0",
    routeKey,
    rawPath,
    rawQueryString,
    headers,
    ...(options.cookies ? { cookies: options.cookies } : {}),
    ...(rawQueryString
      ? { queryStringParameters: Object.fromEntries(new URLSearchParams(rawQueryString)) }
      : {}),
    ...(routeKey.includes("{proxy+}")
      ? { pathParameters: { proxy: rawPath.slice(rawPath.indexOf("/", 1) + 1) } }
      : {}),
    requestContext: {
      accountId: "123456789012",
      apiId: "abc123",
      domainName: new URL(PUBLIC_URL).host,
      domainPrefix: "abc123",
      http: {
        method,
        path: rawPath,
        protocol: "HTTP/1.1",
        sourceIp: "198.51.100.7",
        userAgent: "curl/8.5.0",
      },
      requestId: randomBytes(8).toString("base64url"),
      routeKey,
      stage: "$default",
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    body: text === null ? null : options.base64 ? Buffer.from(text).toString("base64") : text,
    isBase64Encoded: text !== null && options.base64 === true,
    // Without an authorizer API Gateway sends no `authentication` or `authorizer`, which hono's type wants.
  } as unknown as APIGatewayProxyEventV2;
}
