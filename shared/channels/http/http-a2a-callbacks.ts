import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Engine } from "../../engine/engine.ts";
import { ValidationError } from "../../kernel/errors.ts";
import { CALLBACK_PATH } from "../../tools/bindings/a2a-push-client.ts";
import { errorBody } from "./http-kit.ts";

/**
 * `POST /v1/a2a-callbacks/:id`: where a remote A2A agent that Arbor called (the `a2a` tool) pushes
 * its task's changes. Not behind an Arbor API key: each callback has its own token, given to the
 * agent with the call (`Authorization: Bearer <token>`, or the SDK sender's
 * `X-A2A-Notification-Token`), checked against the hash Arbor kept, in constant time. A wrong or
 * missing token is 401 and nothing is written (no token, or an id Arbor never makes: before the
 * body is read or anything is looked up); a body that is not a Task of the call's remote task
 * is 400. A final state settles the call (once) and resumes the leaf; anything else is 200 and
 * changes nothing (see engine/turn/remote-calls.ts).
 */
export const MAX_PUSH_BYTES = 1024 * 1024;

export function a2aCallbackRoutes(engine: Engine): Hono {
  const app = new Hono();
  app.post(
    `${CALLBACK_PATH}/:id`,
    // Open to anyone: what cannot be a push for a call Arbor has out (no token, an id Arbor never
    // makes) is refused before the body is read or anything is looked up.
    async (c, next) => {
      if (tokenOf(c) && CALLBACK_ID.test(c.req.param("id"))) return next();
      c.header("Connection", "close"); // the body is not read
      return unauthorized(c);
    },
    bodyLimit({
      maxSize: MAX_PUSH_BYTES,
      onError: (c) => {
        c.header("Connection", "close");
        return c.json(errorBody("TOO_LARGE", `A push body is at most ${MAX_PUSH_BYTES} bytes`), 413);
      },
    }),
    async (c) => {
      const token = tokenOf(c);
      let body: unknown;
      try {
        body = JSON.parse(await c.req.text());
      } catch {
        body = undefined;
      }
      // The token first: an unauthenticated caller learns nothing of the body's problems.
      const outcome = await engine.receivePush(c.req.param("id"), token, body ?? null).catch((e: unknown) => {
        if (e instanceof ValidationError) return e;
        throw e;
      });
      if (outcome instanceof ValidationError)
        return c.json(errorBody("VALIDATION", `${outcome.message}. Nothing was changed`), 400);
      if (outcome === "unknown" || outcome === "unauthorized") return unauthorized(c);
      return c.json({ status: outcome });
    },
  );
  return app;
}

/** A callback id as Arbor makes them (tools/bindings/a2a-push-client.ts: 18 random bytes, base64url), with room. */
const CALLBACK_ID = /^[A-Za-z0-9_-]{16,64}$/;

const tokenOf = (c: Context): string | undefined =>
  bearer(c.req.header("authorization")) ?? c.req.header("x-a2a-notification-token") ?? undefined;

function unauthorized(c: Context): Response {
  c.header("WWW-Authenticate", 'Bearer realm="arbor-a2a-callback"');
  return c.json(
    errorBody(
      "UNAUTHENTICATED",
      "This push is not for a call Arbor has out, or its token is wrong: send the token Arbor gave " +
        "with the push configuration, as Authorization: Bearer <token>",
    ),
    401,
  );
}

function bearer(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1];
}
