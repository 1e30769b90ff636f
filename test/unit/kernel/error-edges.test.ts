import { A2A_ERROR_CODE, TaskNotFoundError, toJsonRpcError } from "@a2a-js/sdk/errors";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { shownError } from "../../../shared/channels/a2a/a2a-transport.ts";
import { BUSY_TEXT, chatReply } from "../../../shared/channels/chat/chat-parts.ts";
import { refusalText } from "../../../shared/channels/chat/slack/inbound.ts";
import { errorHandler } from "../../../shared/channels/http/http-kit.ts";
import { ERROR_EDGES, edgeOf, JSON_RPC } from "../../../shared/kernel/error-edges.ts";
import {
  ArborError,
  type ErrorCode,
  ForbiddenError,
  UnavailableError,
  ValidationError,
} from "../../../shared/kernel/errors.ts";
import type { Authenticated } from "../../../shared/ports/key-store.ts";
import { toA2aError } from "../../../shared/protocols/a2a/a2a-mapping.ts";

/**
 * The one table of kernel/error-edges.ts: a row for every ErrorCode, and every edge (HTTP, A2A,
 * chat) answering by it as it did before the table (the samples below are the statuses and codes
 * the edges gave; DUPLICATE, which nothing throws yet, was a 500 and is a 409 like CONFLICT).
 */

/** Every code, as a value: the `satisfies` fails the type check when a code is added and not listed here. */
const CODES = Object.keys({
  VALIDATION: 1,
  INVALID_URN: 1,
  INVALID_PATTERN: 1,
  INVALID_TRANSITION: 1,
  NOT_FOUND: 1,
  CONFLICT: 1,
  DUPLICATE: 1,
  TOO_LARGE: 1,
  CONFIG: 1,
  UNAVAILABLE: 1,
  THROTTLED: 1,
  MODEL: 1,
  TOOL: 1,
  BUDGET: 1,
  FORBIDDEN: 1,
  INTERNAL: 1,
} satisfies Record<ErrorCode, 1>) as ErrorCode[];

const SECRET = "the table arbor_state in eu-west-1 and the file /srv/arbor/keys.json";

describe("the error table", () => {
  it("has one row for every code, and nothing else", () => {
    expect(Object.keys(ERROR_EDGES).sort()).toEqual([...CODES].sort());
  });

  it("answers every row it may not show as an internal error: HTTP 500, JSON-RPC -32603, not retried", () => {
    for (const code of CODES) {
      const edge = ERROR_EDGES[code];
      if (edge.shown) continue;
      expect({ code, ...edge }).toEqual({
        code,
        http: 500,
        jsonRpc: JSON_RPC.INTERNAL_ERROR,
        retryable: false,
        shown: false,
      });
    }
    expect(ERROR_EDGES.INTERNAL.shown).toBe(false);
  });

  it("names JSON-RPC codes as the A2A SDK does", () => {
    expect(JSON_RPC.INVALID_PARAMS).toBe(A2A_ERROR_CODE.INVALID_PARAMS);
    expect(JSON_RPC.INTERNAL_ERROR).toBe(A2A_ERROR_CODE.INTERNAL_ERROR);
    expect(JSON_RPC.TASK_NOT_FOUND).toBe(A2A_ERROR_CODE.TASK_NOT_FOUND);
    expect(JSON_RPC.UNSUPPORTED_OPERATION).toBe(A2A_ERROR_CODE.UNSUPPORTED_OPERATION);
    expect(JSON_RPC.PERMISSION_DENIED).toBe(-32000);
  });

  it("has no row for what is not an ArborError", () => {
    expect(edgeOf(new TypeError("x"))).toBeUndefined();
    expect(edgeOf("x")).toBeUndefined();
    expect(edgeOf(new ValidationError("x"))).toBe(ERROR_EDGES.VALIDATION);
  });
});

describe("the HTTP edge", () => {
  const logged: unknown[] = [];
  const app = new Hono();
  app.onError(errorHandler({ error: (_message, ...extra) => void logged.push(extra) }));
  app.get("/:code", (c) => {
    throw new ArborError(c.req.param("code") as ErrorCode, `${c.req.param("code")} happened near ${SECRET}`);
  });
  app.get("/plain/error", () => {
    throw new TypeError(`undefined is not a function near ${SECRET}`);
  });

  const before: Record<string, number> = {
    VALIDATION: 400,
    INVALID_URN: 400,
    FORBIDDEN: 403,
    NOT_FOUND: 404,
    CONFLICT: 409,
    TOO_LARGE: 413,
    THROTTLED: 429,
    UNAVAILABLE: 503,
    INVALID_PATTERN: 500,
    INVALID_TRANSITION: 500,
    CONFIG: 500,
    MODEL: 500,
    BUDGET: 500,
    INTERNAL: 500,
  };

  it("answers each code with the status it had, and shows only the messages a caller may read", async () => {
    for (const [code, status] of Object.entries(before)) {
      const res = await app.request(`/${code}`);
      expect({ code, status: res.status }).toEqual({ code, status });
      const body = (await res.json()) as { error: { code: string; message: string } };
      if (status < 500 || status === 503) {
        expect(body.error).toMatchObject({ code, message: expect.stringContaining(`${code} happened`) });
      } else {
        expect(body.error.code).toBe("INTERNAL");
        expect(body.error.message).not.toContain("arbor_state");
      }
    }
    expect((await app.request("/DUPLICATE")).status).toBe(409);
    expect((await app.request("/TOOL")).status).toBe(500);
    const plain = await app.request("/plain/error");
    expect(plain.status).toBe(500);
    expect(await plain.text()).not.toContain("arbor_state");
    expect(logged.length).toBeGreaterThan(0); // what is not shown goes to the log
  });

  it("says when to try again for what may work a little later", async () => {
    expect((await app.request("/UNAVAILABLE")).headers.get("retry-after")).toBe("1");
    expect((await app.request("/THROTTLED")).headers.get("retry-after")).toBe("1");
    expect((await app.request("/CONFLICT")).headers.get("retry-after")).toBeNull();
  });
});

describe("the A2A edge", () => {
  const who: Authenticated = {
    actor: { id: "user_ada", kind: "human" },
    caller: { tenant: "acme", roles: ["member"] },
  };
  const own = "cld:common.Tenant.acme/common.Conversation.c1";
  const missing = { urn: own, error: () => new TaskNotFoundError("Task not found: t1") };
  const rpc = (error: unknown) => toJsonRpcError(toA2aError(error, who, missing) as Error);

  it("maps each code to the JSON-RPC code it had", () => {
    expect(rpc(new ForbiddenError("the policy refuses"))).toMatchObject({
      code: -32000,
      message: "Permission denied: the policy refuses",
    });
    expect(rpc(new ArborError("NOT_FOUND", "Task t1 not found"))).toMatchObject({ code: -32001 });
    for (const code of ["VALIDATION", "INVALID_URN", "TOO_LARGE"] as const)
      expect(rpc(new ArborError(code, "bad input"))).toMatchObject({ code: -32602, message: "bad input" });
    expect(rpc(new ArborError("CONFLICT", "answered already"))).toMatchObject({ code: -32004 });
    expect(rpc(new ArborError("DUPLICATE", "sent already"))).toMatchObject({ code: -32004 });
    for (const code of ["UNAVAILABLE", "THROTTLED", "CONFIG", "MODEL", "TOOL", "BUDGET", "INTERNAL"] as const)
      expect(rpc(new ArborError(code, SECRET))).toMatchObject({ code: -32603 });
  });

  it("answers anything about another tenant as not found", () => {
    const theirs = { ...missing, urn: "cld:common.Tenant.globex/common.Conversation.c1" };
    const mapped = toA2aError(new ForbiddenError("no"), who, theirs);
    expect(toJsonRpcError(mapped as Error)).toMatchObject({ code: -32001 });
  });

  it("never shows an internal error's detail", () => {
    const internal = toJsonRpcError(toA2aError(new ArborError("CONFIG", SECRET), who, missing) as Error);
    expect(shownError(internal)).toEqual({
      code: -32603,
      message: "Internal error: see the Arbor server's log",
    });
    const refused = toJsonRpcError(toA2aError(new ValidationError("bad input"), who, missing) as Error);
    expect(shownError(refused)).toBe(refused);
  });
});

describe("the chat edge", () => {
  it("tells a person their mistakes and refusals, never anything internal", () => {
    expect(chatReply(new ValidationError("The text is empty"), false)).toMatchObject({
      code: "VALIDATION",
      text: "The text is empty",
    });
    expect(chatReply(new ArborError("CONFLICT", "answered already"), true)?.text).toBe("answered already");
    for (const code of ["CONFIG", "INTERNAL", "MODEL", "TOOL", "BUDGET"] as const)
      expect(chatReply(new ArborError(code, SECRET), false)).toBeUndefined();
    expect(chatReply(new TypeError(SECRET), false)).toBeUndefined();
  });

  it("leaves a retryable error to a platform that retries, and tells a person to try again elsewhere", () => {
    const down = new UnavailableError(`DynamoDB ${SECRET} does not answer`);
    expect(chatReply(down, true)).toBeUndefined();
    expect(chatReply(down, false)).toEqual({ code: "UNAVAILABLE", text: BUSY_TEXT, retryable: true });
    expect(BUSY_TEXT).not.toContain("arbor_state");
  });

  it("words a refusal for Slack", () => {
    expect(refusalText(new ForbiddenError("user_bob may not answer (policy decision d1)"))).toBe(
      "Refused: user_bob may not answer. Only the person who started the conversation, or an admin, may do this.",
    );
    expect(refusalText(new ArborError("THROTTLED", SECRET), true)).toBeUndefined();
    expect(refusalText(new ArborError("THROTTLED", SECRET))).toBe(BUSY_TEXT);
    expect(refusalText(new ValidationError("The request is empty", ["text: required"]))).toBe(
      "The request is empty: text: required",
    );
  });
});
