/**
 * A local AWS Lambda peer for tests: an HTTP server that speaks the part of Lambda's REST API that
 * the AWS SDK v3 client (`@aws-sdk/client-lambda`) uses for a synchronous Invoke, so the real
 * client can be pointed at it (`endpoint` = the peer, any region, dummy credentials).
 *
 * Protocol (restJson1): `POST /2015-03-31/functions/{FunctionName}/invocations[?Qualifier=...]`,
 * FunctionName URL-encoded (a name, `name:qualifier`, or an ARN), the event as the body,
 * `X-Amz-Invocation-Type: RequestResponse` (the default). Answers as Lambda does:
 * - the handler's result: 200, the result as JSON, `X-Amz-Executed-Version: $LATEST`;
 * - the handler threw: 200, `X-Amz-Function-Error: Unhandled`, body
 *   `{"errorType", "errorMessage", "trace"}` (what the Node.js runtime sends);
 * - no such function: 404, `x-amzn-ErrorType: ResourceNotFoundException`,
 *   `{"Type":"User","message":"Function not found: <arn>"}`;
 * - a function named in `denied`: 403 AccessDeniedException, as when the caller's role lacks
 *   lambda:InvokeFunction;
 * - a function with invocations left in `throttled`: 429 TooManyRequestsException
 *   (`{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded"}`), and the function does not run;
 * - no Authorization header: 403 MissingAuthenticationTokenException. SigV4 signatures are not
 *   verified; the region of the credential scope is recorded.
 *
 * A handler gets the event and, as a Node.js function does, a context: `awsRequestId`,
 * `invokedFunctionArn` (with the version or alias it was invoked with) and `clientContext`.
 *
 * Test hooks: `start(handlers)`, `close()`, `invocations` (every Invoke that reached a function),
 * `abandoned` (functions whose caller closed the request before they answered), `connections()`
 * (the connections clients hold open to the peer), `client(region)` (the real SDK client pointed here).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { LambdaClient } from "@aws-sdk/client-lambda";

/** A function's handler: the event in, the result out (thrown errors are function errors). */
export type LambdaHandler = (event: unknown, context: LambdaContext) => unknown;

/** What the peer gives a handler of Lambda's context object (the Node.js runtime's names). */
export interface LambdaContext {
  awsRequestId: string;
  /** The ARN invoked, in the caller's region, with the qualifier it was invoked with. */
  invokedFunctionArn: string;
  /** The client context the caller sent (X-Amz-Client-Context), decoded. */
  clientContext?: unknown;
}

export interface LambdaInvocation {
  /** FunctionName as the client sent it (decoded). */
  functionName: string;
  /** The function it resolved to. */
  name: string;
  /** From `?Qualifier=` or the `:qualifier` of the name. */
  qualifier?: string;
  /** The region of the request's credential scope. */
  region?: string;
  invocationType: string;
  /** The event, parsed from JSON. */
  payload: unknown;
  /** The client context (X-Amz-Client-Context, base64 JSON), decoded, when the client sent one. */
  clientContext?: unknown;
}

export interface LambdaPeerOptions {
  /** Functions whose invocation is refused with AccessDeniedException. */
  denied?: readonly string[];
  /**
   * Functions whose next n invocations are refused with 429 TooManyRequestsException (the function
   * does not run), as when its concurrency is used up; counted down as they are refused.
   */
  throttled?: Record<string, number>;
  /** Account of the ARNs in messages (default 123456789012). */
  account?: string;
}

const INVOKE = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;
const ARN = /^arn:aws[a-z-]*:lambda:([a-z0-9-]+):(\d{12}):function:([^:]+)(?::(.+))?$/;
const SCOPE_REGION = /Credential=[^/]+\/\d{8}\/([^/]+)\/lambda\//;

export class LambdaInvokePeer {
  readonly invocations: LambdaInvocation[] = [];
  readonly abandoned: string[] = [];
  readonly #handlers: Map<string, LambdaHandler>;
  readonly #options: LambdaPeerOptions;
  readonly #server: Server;
  #endpoint = "";

  private constructor(handlers: Record<string, LambdaHandler>, options: LambdaPeerOptions) {
    this.#handlers = new Map(Object.entries(handlers));
    this.#options = options;
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        if (!res.headersSent)
          send(res, 500, { "x-amzn-ErrorType": "ServiceException" }, { message: String(e) });
      });
    });
  }

  static async start(
    handlers: Record<string, LambdaHandler>,
    options: LambdaPeerOptions = {},
  ): Promise<LambdaInvokePeer> {
    const peer = new LambdaInvokePeer(handlers, options);
    await new Promise<void>((resolve) => peer.#server.listen(0, "127.0.0.1", resolve));
    peer.#endpoint = `http://127.0.0.1:${(peer.#server.address() as AddressInfo).port}`;
    return peer;
  }

  get endpoint(): string {
    return this.#endpoint;
  }

  /** The real SDK client, pointed at this peer with dummy credentials. */
  client(region = "us-east-1"): LambdaClient {
    return new LambdaClient({
      endpoint: this.#endpoint,
      region,
      credentials: { accessKeyId: "AKIDLAMBDAPEER", secretAccessKey: "lambda-peer-secret" },
      maxAttempts: 1,
    });
  }

  /** How many connections clients hold open to the peer (kept alive between requests). */
  connections(): Promise<number> {
    return new Promise((resolve, reject) =>
      this.#server.getConnections((e, n) => (e ? reject(e) : resolve(n))),
    );
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((r) => this.#server.close(r));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.#endpoint);
    let body = "";
    for await (const chunk of req) body += chunk;
    const route = INVOKE.exec(url.pathname);
    if (req.method !== "POST" || !route) {
      send(res, 404, { "x-amzn-ErrorType": "UnknownOperationException" }, { message: "Unknown operation" });
      return;
    }
    const authorization = req.headers.authorization;
    if (!authorization) {
      send(
        res,
        403,
        { "x-amzn-ErrorType": "MissingAuthenticationTokenException" },
        { message: "Missing Authentication Token" },
      );
      return;
    }
    const functionName = decodeURIComponent(route[1] as string);
    const region = SCOPE_REGION.exec(authorization)?.[1] ?? "us-east-1";
    const account = this.#options.account ?? "123456789012";
    const arn = ARN.exec(functionName);
    const [name, nameQualifier] = arn
      ? [arn[3] as string, arn[4]]
      : (functionName.split(":", 2) as [string, string | undefined]);
    const qualifier = url.searchParams.get("Qualifier") ?? nameQualifier;
    const functionArn = `arn:aws:lambda:${region}:${account}:function:${name}${qualifier ? `:${qualifier}` : ""}`;
    const handler = this.#handlers.get(name);
    if (!handler) {
      send(
        res,
        404,
        { "x-amzn-ErrorType": "ResourceNotFoundException" },
        { Type: "User", message: `Function not found: ${functionArn}` },
      );
      return;
    }
    if (this.#options.denied?.includes(name)) {
      send(
        res,
        403,
        { "x-amzn-ErrorType": "AccessDeniedException" },
        {
          Type: "User",
          Message: `User: arn:aws:sts::${account}:assumed-role/arbor-engine/turn is not authorized to perform: lambda:InvokeFunction on resource: ${functionArn} because no identity-based policy allows the lambda:InvokeFunction action`,
        },
      );
      return;
    }
    const throttled = this.#options.throttled;
    if (throttled && (throttled[name] ?? 0) > 0) {
      throttled[name] = (throttled[name] ?? 0) - 1;
      send(
        res,
        429,
        { "x-amzn-ErrorType": "TooManyRequestsException" },
        {
          Type: "User",
          message: "Rate Exceeded.",
          Reason: "ReservedFunctionConcurrentInvocationLimitExceeded",
        },
      );
      return;
    }
    let payload: unknown;
    try {
      payload = body ? JSON.parse(body) : {};
    } catch {
      send(
        res,
        400,
        { "x-amzn-ErrorType": "InvalidRequestContentException" },
        { Type: "User", message: "Could not parse request body into json" },
      );
      return;
    }
    const clientContext = clientContextOf(req.headers["x-amz-client-context"]);
    this.invocations.push({
      functionName,
      name,
      ...(qualifier ? { qualifier } : {}),
      region,
      invocationType: String(req.headers["x-amz-invocation-type"] ?? "RequestResponse"),
      payload,
      ...clientContext,
    });
    res.once("close", () => {
      if (!res.writableEnded) this.abandoned.push(name);
    });
    const awsRequestId = crypto.randomUUID();
    const executed = { "X-Amz-Executed-Version": "$LATEST", "x-amzn-RequestId": awsRequestId };
    let result: unknown;
    try {
      result = await handler(payload, { awsRequestId, invokedFunctionArn: functionArn, ...clientContext });
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      send(
        res,
        200,
        { ...executed, "X-Amz-Function-Error": "Unhandled" },
        {
          errorType: error.name,
          errorMessage: error.message,
          trace: (error.stack ?? "").split("\n"),
        },
      );
      return;
    }
    send(res, 200, executed, result ?? null);
  }
}

/** The client context header decoded, as Lambda hands it to a function (`context.clientContext`). */
function clientContextOf(header: string | string[] | undefined): { clientContext?: unknown } {
  if (typeof header !== "string") return {};
  return { clientContext: JSON.parse(Buffer.from(header, "base64").toString("utf8")) };
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: unknown): void {
  if (res.destroyed) return; // the client gave up (a timeout)
  res.writeHead(status, {
    "content-type": "application/json",
    "x-amzn-RequestId": crypto.randomUUID(),
    ...headers,
  });
  res.end(JSON.stringify(body));
}
