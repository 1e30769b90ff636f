import type { Context } from "hono";

/**
 * The client's address as the runtime saw it: the socket's peer under `arbor serve`
 * (@hono/node-server passes the Node request as `env.incoming`), the source IP API Gateway
 * reports on AWS (hono/aws-lambda passes the event's `requestContext`). Never a header a client
 * sets (X-Forwarded-For): a client could name any address there. Undefined when neither is at hand.
 */
export function sourceAddress(c: Context): string | undefined {
  const env = c.env as
    | {
        incoming?: { socket?: { remoteAddress?: string } };
        requestContext?: { http?: { sourceIp?: string }; identity?: { sourceIp?: string } };
      }
    | undefined;
  return (
    env?.incoming?.socket?.remoteAddress ??
    env?.requestContext?.http?.sourceIp ??
    env?.requestContext?.identity?.sourceIp
  );
}
