import { fileURLToPath } from "node:url";
import { Duration, type RemovalPolicy, Validations } from "aws-cdk-lib";
import { AccessLogFormat } from "aws-cdk-lib/aws-apigateway";
import {
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
  PayloadFormatVersion,
} from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import type { IManagedPolicy } from "aws-cdk-lib/aws-iam";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { EngineFunction } from "./engine-function.ts";

/**
 * Stage throttling of the HTTP API (every route together), from CDK context
 * (`-c apiRateLimit=<requests per second> -c apiBurstLimit=<requests>`). Per key and per tenant
 * the app keeps its own limits besides (ARBOR_RATE_LIMIT_PER_KEY / _PER_TENANT).
 */
export interface ApiThrottle {
  readonly rateLimit: number;
  readonly burstLimit: number;
}
export const DEFAULT_API_THROTTLE: ApiThrottle = { rateLimit: 50, burstLimit: 100 };

/**
 * The routes of the HTTP API: exactly the paths of the app (shared/channels/http/http-server.ts). The
 * A2A endpoint is both `/a2a` and `/a2a/` (the app serves both; clients that join a card's URL
 * with a path add the slash). API Gateway matches a route's path exactly and takes none that ends
 * with `/`, so `/a2a/` is reached through `/a2a/{proxy+}`; any longer path there is the app's 404.
 */
export const API_ROUTES = [
  { path: "/v1/{proxy+}", methods: [HttpMethod.ANY] },
  { path: "/a2a", methods: [HttpMethod.POST] },
  { path: "/a2a/{proxy+}", methods: [HttpMethod.POST] },
  { path: "/.well-known/agent-card.json", methods: [HttpMethod.GET] },
  { path: "/healthz", methods: [HttpMethod.GET] },
  // The web console (shared/channels/console/): its pages, its two files, sign-in and sign-out.
  { path: "/console", methods: [HttpMethod.GET] },
  { path: "/console/{proxy+}", methods: [HttpMethod.GET, HttpMethod.POST] },
] as const;

/**
 * The console's script and style sheet, shipped in the API function's bundle beside its module
 * (shared/channels/console/assets.ts looks for them there): name in the bundle -> file at synth.
 */
export const CONSOLE_ASSETS: Readonly<Record<string, string>> = Object.fromEntries(
  ["console.js", "console.css"].map((name) => [
    name,
    fileURLToPath(new URL(`../../shared/channels/console/assets/${name}`, import.meta.url)),
  ]),
);

/**
 * The chat channels' routes (shared/channels/chat/chat-routes.ts): Slack's events, slash commands and
 * interactivity, Teams' activities. Only when the stack has the chat secret (-c chatSecret):
 * without it API Gateway answers these paths itself (404), the function is not invoked.
 */
export const CHAT_ROUTES = [
  { path: "/slack/{proxy+}", methods: [HttpMethod.POST] },
  { path: "/teams/{proxy+}", methods: [HttpMethod.POST] },
] as const;

export interface ApiGatewayProps {
  /** The API function (functions/api.ts). */
  readonly handler: IFunction;
  readonly throttle: ApiThrottle;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
  /** The chat channels' routes too (CHAT_ROUTES): the stack has their secret. */
  readonly chat?: boolean;
}

/**
 * API Gateway's HTTP API in front of the API function: one integration (payload format 2.0) for
 * the app's paths, the `$default` stage (auto-deployed, throttled, with JSON access logs in their
 * own log group). Anything else is API Gateway's own 404, without invoking the function.
 */
export class ApiGateway extends Construct {
  readonly api: HttpApi;
  readonly stage: HttpStage;
  readonly accessLogs: LogGroup;
  /** The stage's URL, e.g. https://abc123.execute-api.eu-west-1.amazonaws.com (no trailing slash). */
  readonly url: string;

  constructor(scope: Construct, id: string, props: ApiGatewayProps) {
    super(scope, id);
    this.api = new HttpApi(this, "HttpApi", {
      description: "Arbor's HTTP API, A2A endpoint and agent card (the API function)",
      createDefaultStage: false,
    });
    this.accessLogs = new LogGroup(this, "AccessLogs", {
      retention: props.logRetention,
      removalPolicy: props.removalPolicy,
    });
    this.stage = new HttpStage(this, "Stage", {
      httpApi: this.api,
      stageName: "$default",
      autoDeploy: true,
      throttle: props.throttle,
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: "$context.requestId",
            time: "$context.requestTime",
            ip: "$context.identity.sourceIp",
            method: "$context.httpMethod",
            path: "$context.path",
            routeKey: "$context.routeKey",
            status: "$context.status",
            protocol: "$context.protocol",
            responseLength: "$context.responseLength",
            latencyMs: "$context.responseLatency",
            integrationLatencyMs: "$context.integrationLatency",
            integrationError: "$context.integrationErrorMessage",
          }),
        ),
      },
    });
    const integration = new HttpLambdaIntegration("ApiFunction", props.handler, {
      payloadFormatVersion: PayloadFormatVersion.VERSION_2_0,
    });
    for (const route of API_ROUTES)
      for (const r of this.api.addRoutes({ path: route.path, methods: [...route.methods], integration }))
        Validations.of(r).acknowledge({
          id: "AwsSolutions-APIG4",
          reason:
            "Callers are authenticated by the app itself, with Arbor API keys (Authorization: Bearer, sha256 " +
            "in the state table) or a console session made from one, checked per request; /healthz, the agent " +
            "card, the console's sign-in form and its two static files are public by design.",
        });
    for (const route of props.chat ? CHAT_ROUTES : [])
      for (const r of this.api.addRoutes({ path: route.path, methods: [...route.methods], integration }))
        Validations.of(r).acknowledge({
          id: "AwsSolutions-APIG4",
          reason:
            "Slack and Teams cannot present an IAM or JWT authorizer's credentials: the app verifies each request " +
            "itself, Slack's by its v0 signature on the raw body (5-minute window), Teams' by the Bot Framework " +
            "JWT (issuer, audience, expiry, signing key, service URL).",
        });
    this.url = this.api.apiEndpoint;
  }
}

export interface ArborApiProps {
  /** The engine functions' environment; the API function adds its public URL and A2A wait. */
  readonly environment: Record<string, string>;
  /** What the API function may do: the data, and listing the tools (no model, no tool's grant). */
  readonly policies: readonly IManagedPolicy[];
  /** Files shipped in its bundle (the default team, `team.json`). */
  readonly bundledFiles?: Readonly<Record<string, string>>;
  readonly throttle: ApiThrottle;
  readonly logRetention: RetentionDays;
  readonly removalPolicy: RemovalPolicy;
  /** The chat channels' routes too (see CHAT_ROUTES). */
  readonly chat?: boolean;
}

/** Under API Gateway's 30 s integration timeout, with room to answer. */
export const API_A2A_BLOCKING_WAIT_MS = 25_000;

/**
 * The front door: the API function (functions/api.ts, its own role with `policies` only) behind
 * the HTTP API. The function learns its public URL (ARBOR_PUBLIC_URL, for the agent card) from
 * the API's endpoint, never from a request.
 */
export class ArborApi extends Construct {
  readonly function: EngineFunction;
  readonly gateway: ApiGateway;

  constructor(scope: Construct, id: string, props: ArborApiProps) {
    super(scope, id);
    const {
      ARBOR_MODEL_PROVIDER: _p,
      ARBOR_MODEL: _m,
      ARBOR_TOOLS_FILE: _t,
      ...environment
    } = props.environment;
    this.function = new EngineFunction(this, "Function", {
      entry: "functions/api.ts",
      description: "Arbor API function: the HTTP API, A2A, the agent card and the console behind API Gateway",
      timeout: Duration.seconds(29),
      memorySize: 1024,
      environment: { ...environment, ARBOR_A2A_BLOCKING_WAIT_MS: String(API_A2A_BLOCKING_WAIT_MS) },
      policies: props.policies,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      // Invoked synchronously by API Gateway: the caller sees a failure; nothing to retry here.
      retryAttempts: 0,
      maxEventAge: Duration.minutes(1),
      bundledFiles: { ...CONSOLE_ASSETS, ...(props.bundledFiles ?? {}) },
    });
    this.gateway = new ApiGateway(this, "Gateway", {
      handler: this.function.function,
      throttle: props.throttle,
      logRetention: props.logRetention,
      removalPolicy: props.removalPolicy,
      ...(props.chat ? { chat: true } : {}),
    });
    this.function.function.addEnvironment("ARBOR_PUBLIC_URL", this.gateway.url);
  }
}
