import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { VersionNotSupportedError } from "@a2a-js/sdk/errors";
import { type A2ARequestHandler, JsonRpcTransportHandler, type ServerCallContext } from "@a2a-js/sdk/server";
import { JSON_RPC } from "../../kernel/error-edges.ts";

/**
 * The two protocol versions on one JSON-RPC endpoint. The `A2A-Version` header (or, as the spec
 * allows, an `A2A-Version` query parameter) picks the version: "1.0" is served by the SDK's 1.0
 * transport, "0.3" by its 0.3 compatibility transport (LegacyJsonRpcTransportHandler); both over
 * the same request handler (ArborA2aTasks), so a task sent in one version reads the same in the
 * other. A request without the header, or with an empty one, is A2A 0.3 (A2A 1.0 §3.6.2: a 0.3
 * client sends no header). Patch numbers are ignored ("1.0.2" is 1.0). Any other version is
 * VersionNotSupportedError (-32009), and a method of the other version is "method not found"
 * (-32601) with a message naming the header to send.
 */
export type A2aVersion = "1.0" | "0.3";
export const A2A_VERSIONS: readonly A2aVersion[] = ["1.0", "0.3"];

/** The version a request asks for, or the error that says it is not one Arbor speaks. */
export function negotiateVersion(
  header: string | undefined | null,
  query: string | undefined | null,
): A2aVersion | VersionNotSupportedError {
  const asked = (header ?? query ?? "").trim();
  if (asked === "") return "0.3";
  const [, major, minor] = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(asked) ?? [];
  const version = `${Number(major)}.${Number(minor)}`;
  if (major !== undefined && (A2A_VERSIONS as readonly string[]).includes(version))
    return version as A2aVersion;
  return new VersionNotSupportedError(
    `The requested A2A protocol version '${asked.slice(0, 40)}' is not supported: Arbor speaks 1.0 ` +
      "(send A2A-Version: 1.0) and 0.3 (send no A2A-Version header, or A2A-Version: 0.3)",
  );
}

/** Each version's JSON-RPC methods, with the other version's name for the same thing. */
const V1_TO_V03: Record<string, string | undefined> = {
  SendMessage: "message/send",
  SendStreamingMessage: "message/stream",
  GetTask: "tasks/get",
  ListTasks: undefined,
  CancelTask: "tasks/cancel",
  SubscribeToTask: "tasks/resubscribe",
  CreateTaskPushNotificationConfig: "tasks/pushNotificationConfig/set",
  GetTaskPushNotificationConfig: "tasks/pushNotificationConfig/get",
  ListTaskPushNotificationConfigs: "tasks/pushNotificationConfig/list",
  DeleteTaskPushNotificationConfig: "tasks/pushNotificationConfig/delete",
  GetExtendedAgentCard: "agent/getAuthenticatedExtendedCard",
};
const V03_TO_V1 = Object.fromEntries(
  Object.entries(V1_TO_V03).flatMap(([v1, v03]) => (v03 ? [[v03, v1]] : [])),
) as Record<string, string>;

/** Why `method` is not one of `version`'s (it is the other version's), or undefined. */
export function wrongVersion(method: string, version: A2aVersion, headerSent: boolean): string | undefined {
  if (version === "0.3" && Object.hasOwn(V1_TO_V03, method)) {
    const same = V1_TO_V03[method];
    return (
      `${method} is an A2A 1.0 method, and this request is A2A 0.3 ` +
      `(${headerSent ? "it says A2A-Version: 0.3" : "it has no A2A-Version header"}): ` +
      `send the header A2A-Version: 1.0${same ? `, or call the 0.3 method ${same}` : ""}`
    );
  }
  if (version === "1.0" && Object.hasOwn(V03_TO_V1, method))
    return (
      `${method} is an A2A 0.3 method, and this request says A2A-Version: 1.0: send it without the ` +
      `A2A-Version header (or with A2A-Version: 0.3), or call the 1.0 method ${V03_TO_V1[method]}`
    );
  return undefined;
}

/** A JSON-RPC response as the SDK's transports return it. */
export interface RpcResponse {
  jsonrpc: string;
  id: string | number | null;
  result?: unknown;
  error?: unknown;
}

export const rpcError = (id: string | number | null, code: number, message: string): RpcResponse => ({
  jsonrpc: "2.0",
  id,
  error: { code, message },
});

/** An error as `version`'s JSON-RPC error object. */
export function errorOf(error: unknown, version: A2aVersion): unknown {
  return version === "1.0"
    ? JsonRpcTransportHandler.mapToJSONRPCError(error)
    : LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(error);
}

/** What a caller reads of an internal error: where to look, never its detail (that is for the log). */
export const INTERNAL_ERROR_TEXT = "Internal error: see the Arbor server's log";

/**
 * A JSON-RPC error object as the caller may read it: an internal error (-32603: anything that is
 * not the SDK's own or an ArborError whose row in kernel/error-edges.ts maps to another code) says
 * only INTERNAL_ERROR_TEXT. Log the error before: its detail is not here any more.
 */
export function shownError(error: unknown): unknown {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === JSON_RPC.INTERNAL_ERROR ? { code, message: INTERNAL_ERROR_TEXT } : error;
}

/** The JSON-RPC transports of both versions over one request handler. */
export class A2aJsonRpc {
  readonly #v1: JsonRpcTransportHandler;
  readonly #v03: LegacyJsonRpcTransportHandler;

  constructor(handler: A2ARequestHandler) {
    this.#v1 = new JsonRpcTransportHandler(handler);
    this.#v03 = new LegacyJsonRpcTransportHandler(handler);
  }

  handle(
    body: Record<string, unknown>,
    context: ServerCallContext,
    version: A2aVersion,
  ): Promise<RpcResponse | AsyncGenerator<RpcResponse, void, undefined>> {
    if (version === "1.0")
      return this.#v1.handle(body, context) as Promise<
        RpcResponse | AsyncGenerator<RpcResponse, void, undefined>
      >;
    return (
      this.#v03.handle(blockingByDefault(body), context) as Promise<
        RpcResponse | AsyncGenerator<RpcResponse, void, undefined>
      >
    ).then((out) => (Symbol.asyncIterator in out ? finalWhenInterrupted(out) : out));
  }
}

/**
 * A 0.3 stream's status update says `final: true` where the stream ends: at a terminal state (the
 * SDK's translation says so) and at input-required, where Arbor's streams end too (a2a-streams.ts:
 * the caller answers, then resubscribes), as 0.3's servers mark it.
 */
async function* finalWhenInterrupted(
  out: AsyncGenerator<RpcResponse, void, undefined>,
): AsyncGenerator<RpcResponse, void, undefined> {
  for await (const envelope of out) {
    const result = envelope.result as
      | { kind?: string; status?: { state?: string }; final?: boolean }
      | undefined;
    yield result?.kind === "status-update" && result.status?.state === "input-required"
      ? { ...envelope, result: { ...result, final: true } }
      : envelope;
  }
}

/**
 * A 0.3 `message/send` whose configuration does not say `blocking` blocks, as 0.3 servers do (the
 * SDK's 0.3 reference servers wait unless `blocking` is false); the SDK's compatibility layer
 * would read a missing `blocking` as "return immediately".
 */
function blockingByDefault(body: Record<string, unknown>): Record<string, unknown> {
  const params = body.params as { configuration?: unknown } | undefined;
  const configuration = params?.configuration;
  if (body.method !== "message/send" || typeof configuration !== "object" || configuration === null)
    return body;
  if ((configuration as { blocking?: unknown }).blocking != null) return body;
  return { ...body, params: { ...params, configuration: { ...configuration, blocking: true } } };
}
