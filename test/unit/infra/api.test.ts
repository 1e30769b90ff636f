import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { App, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { HttpApi, HttpMethod } from "aws-cdk-lib/aws-apigatewayv2";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import { Code, Function as LambdaFunction, Runtime } from "aws-cdk-lib/aws-lambda";
import { AwsSolutionsChecks } from "cdk-nag";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import { beforeAll, describe, expect, it } from "vitest";
import { createApp, readApiThrottle, SettingsError } from "../../../infra/app.ts";
import { API_A2A_BLOCKING_WAIT_MS, DEFAULT_API_THROTTLE } from "../../../infra/constructs/api-gateway.ts";
import { ENGINE_OUTPUT_KEYS, type EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";
import { deployedEnvironment, lazyChunksWithoutNames, logicalId } from "../../support/cdk.ts";

/**
 * The front door as `cdk synth` makes it: API Gateway's HTTP API with the app's routes, a
 * throttled `$default` stage with access logs, and the API function with its own role: the data
 * policy and the tool function's ListTools (to check team files against the tools' names), nothing
 * for the model and no tool's own grant.
 */
const cdkJson = JSON.parse(readFileSync(new URL("../../../cdk.json", import.meta.url), "utf8")) as {
  context: Record<string, unknown>;
};

interface CfnRes {
  Type: string;
  Properties: Record<string, unknown>;
}

let app: App;
let engine: EngineStack;
let t: Template;
const all = (type: string) => Object.entries(t.findResources(type) as Record<string, CfnRes>);
const props = (id: string) => (t.toJSON().Resources as Record<string, CfnRes>)[id]?.Properties ?? {};
const flat = (v: unknown) => flattenCfnReference(v);

beforeAll(() => {
  const created = createApp({
    context: { ...cdkJson.context, stage: "prod", apiRateLimit: "20", apiBurstLimit: "40" },
    processEnv: {},
  });
  created.app.synth();
  app = created.app;
  engine = created.engine;
  t = Template.fromStack(engine);
}, 180_000);

describe("the HTTP API", () => {
  it("has the app's routes, all on the one integration with the API function (payload format 2.0)", () => {
    const routes = all("AWS::ApiGatewayV2::Route").map(([, r]) => r.Properties);
    expect(routes.map((r) => r.RouteKey).sort()).toEqual(
      [
        "ANY /v1/{proxy+}",
        "GET /.well-known/agent-card.json",
        // The console: its pages and files (GET), its sign-in and sign-out (POST).
        "GET /console",
        "GET /console/{proxy+}",
        "POST /console/{proxy+}",
        "GET /healthz",
        "POST /a2a",
        // POST /a2a/ (a trailing slash): API Gateway takes no route path ending in /, else its own 404.
        "POST /a2a/{proxy+}",
      ].sort(),
    );
    const integrations = all("AWS::ApiGatewayV2::Integration");
    expect(integrations).toHaveLength(1);
    const [id, integration] = integrations[0] as [string, CfnRes];
    expect(integration.Properties).toMatchObject({
      IntegrationType: "AWS_PROXY",
      PayloadFormatVersion: "2.0",
    });
    expect(flat(integration.Properties.IntegrationUri)).toBe(
      flat({ "Fn::GetAtt": [logicalId(engine.api.function.function), "Arn"] }),
    );
    for (const r of routes) expect(flat(r.Target)).toBe(`integrations/${flat({ Ref: id })}`);
    // No authorizer on API Gateway: the app checks API keys itself (cdk-nag APIG4, acknowledged).
    for (const r of routes) expect(r.AuthorizationType ?? "NONE").toBe("NONE");
  });

  it("lets only this API invoke the function", () => {
    const permissions = all("AWS::Lambda::Permission").filter(
      ([, p]) =>
        flat(p.Properties.FunctionName) ===
        flat({ "Fn::GetAtt": [logicalId(engine.api.function.function), "Arn"] }),
    );
    expect(permissions.length).toBeGreaterThan(0);
    for (const [, p] of permissions) {
      expect(p.Properties.Principal).toBe("apigateway.amazonaws.com");
      expect(flat(p.Properties.SourceArn)).toContain(flat({ Ref: logicalId(engine.api.gateway.api) }));
    }
  });

  it("throttles the $default stage by the context keys, and logs every request as JSON to its own group", () => {
    const stages = all("AWS::ApiGatewayV2::Stage");
    expect(stages).toHaveLength(1);
    const stage = (stages[0] as [string, CfnRes])[1].Properties;
    expect(stage).toMatchObject({
      StageName: "$default",
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 20, ThrottlingBurstLimit: 40 },
    });
    const logs = stage.AccessLogSettings as { DestinationArn: unknown; Format: string };
    expect(flat(logs.DestinationArn)).toBe(
      flat({ "Fn::GetAtt": [logicalId(engine.api.gateway.accessLogs), "Arn"] }),
    );
    expect(JSON.parse(logs.Format)).toMatchObject({
      requestId: "$context.requestId",
      status: "$context.status",
      routeKey: "$context.routeKey",
    });
    expect(props(logicalId(engine.api.gateway.accessLogs))).toMatchObject({ RetentionInDays: 30 });
  });

  it("reads its throttling from -c apiRateLimit / -c apiBurstLimit, with defaults, naming a bad key", () => {
    const read = (context: Record<string, unknown>) => readApiThrottle(new App({ context }));
    expect(read({})).toEqual(DEFAULT_API_THROTTLE);
    expect(read({ apiRateLimit: "5", apiBurstLimit: 10 })).toEqual({ rateLimit: 5, burstLimit: 10 });
    expect(() => read({ apiRateLimit: "0" })).toThrow(SettingsError);
    expect(() => read({ apiBurstLimit: "lots" })).toThrow(/apiBurstLimit/);
  });

  it("publishes where the API and its agent card are", () => {
    const outputs = t.toJSON().Outputs as Record<string, { Value: unknown }>;
    const endpoint = flat(outputs[ENGINE_OUTPUT_KEYS.apiUrl]?.Value);
    expect(endpoint).toBe(flat({ "Fn::GetAtt": [logicalId(engine.api.gateway.api), "ApiEndpoint"] }));
    expect(flat(outputs[ENGINE_OUTPUT_KEYS.agentCardUrl]?.Value)).toBe(
      `${endpoint}/.well-known/agent-card.json`,
    );
  });
});

describe("the API function", () => {
  const fn = () => props(logicalId(engine.api.function.function));
  const vars = () => (fn().Environment as { Variables: Record<string, unknown> }).Variables;

  it("learns its public URL from the API's endpoint, waits 25 s at most on a blocking A2A send, and has no model or tools", () => {
    expect(fn()).toMatchObject({ Runtime: "nodejs24.x", Architectures: ["arm64"], Timeout: 29 });
    const outputs = t.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(flat(vars().ARBOR_PUBLIC_URL)).toBe(flat(outputs[ENGINE_OUTPUT_KEYS.apiUrl]?.Value));
    expect(vars().ARBOR_A2A_BLOCKING_WAIT_MS).toBe(String(API_A2A_BLOCKING_WAIT_MS));
    expect(API_A2A_BLOCKING_WAIT_MS).toBeLessThan(29_000);
    for (const unwanted of ["ARBOR_MODEL_PROVIDER", "ARBOR_MODEL", "ARBOR_TOOLS_FILE"])
      expect(vars()).not.toHaveProperty(unwanted);
    const env = deployedEnvironment(vars());
    const config = loadConfig({
      ...env,
      ARBOR_PUBLIC_URL: "https://abc123.execute-api.eu-west-1.amazonaws.com",
      // The notify delivery queue's URL (infra-notify.test.ts checks it names the queue).
      ARBOR_NOTIFY_QUEUE_URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/deliveries",
      AWS_REGION: "eu-west-1",
    });
    expect(config).toMatchObject({ mode: "aws", a2aBlockingWaitMs: 25_000 });
    expect(config.model).toBeUndefined();
  });

  it("has its own role with the data policy and the tool function's invoke only: nothing for the model, no tool's grant", () => {
    const role = props(logicalId(engine.api.function.role));
    expect(role.ManagedPolicyArns).toEqual([
      { Ref: logicalId(engine.apiDataPolicy) },
      { Ref: logicalId(engine.tools.invokePolicy) },
    ]);
    // It names the tool function (to list the tools), and no registry of its own.
    expect(flat(vars().ARBOR_TOOL_FUNCTION)).toBe(flat({ Ref: logicalId(engine.tools.handler.function) }));
    const inline = all("AWS::IAM::Policy").filter(([, p]) =>
      (p.Properties.Roles as unknown[]).some(
        (r) => flat(r) === flat({ Ref: logicalId(engine.api.function.role) }),
      ),
    );
    const actions = inline.flatMap(([, p]) =>
      (p.Properties.PolicyDocument as { Statement: { Action: string | string[] }[] }).Statement.flatMap(
        (s) => (Array.isArray(s.Action) ? s.Action : [s.Action]),
      ),
    );
    // Its logs, and queueing deliveries on the notify queue (infra-notify.test.ts checks which queue).
    expect(actions.every((a) => a.startsWith("logs:") || a.startsWith("sqs:"))).toBe(true);
    expect([...new Set(actions.filter((a) => a.startsWith("sqs:")))].sort()).toEqual(
      ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"].sort(),
    );
    // Its data policy's only Bedrock grant is Titan embeddings (team registration indexes assistants).
    const data = JSON.stringify(props(logicalId(engine.apiDataPolicy)));
    expect(data).not.toContain("InvokeModelWithResponseStream");
    expect(data).not.toContain("lambda:InvokeFunction");
    expect(data.match(/foundation-model\/[^"]+/g)).toEqual(["foundation-model/amazon.titan-embed-text-v2:0"]);
  });

  it("is its own bundle, which loads on its own and says what to set before touching AWS", () => {
    const key = (fn().Code as { S3Key: string }).S3Key;
    const stepKey = (props(logicalId(engine.steps.plan.function)).Code as { S3Key: string }).S3Key;
    expect(key).not.toBe(stepKey);
    // What it loads with import() has its names (function-bundle.ts splits it into chunks).
    expect(lazyChunksWithoutNames(join(app.outdir, `asset.${key.replace(/\.zip$/, "")}`))).toEqual([]);
    const bundle = pathToFileURL(join(app.outdir, `asset.${key.replace(/\.zip$/, "")}`, "index.mjs")).href;
    const script = `
      const { handler } = await import(${JSON.stringify(bundle)});
      const event = { version: "2.0", routeKey: "GET /healthz", rawPath: "/healthz", rawQueryString: "", headers: {}, isBase64Encoded: false,
        requestContext: { domainName: "x.execute-api.eu-west-1.amazonaws.com", http: { method: "GET", path: "/healthz" } } };
      try { await handler(event); process.stdout.write("no error\\n"); } catch (e) { process.stdout.write(e.name + ": " + e.message + "\\n"); }`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      env: { PATH: process.env.PATH, POWERTOOLS_LOG_LEVEL: "SILENT" },
      encoding: "utf8",
    });
    expect(out).toMatch(/^ConfigError: .*ARBOR_MODE=aws/);
    // The console's two files ride beside the module, where the console looks for them.
    for (const name of ["console.js", "console.css"])
      expect(readFileSync(join(app.outdir, `asset.${key.replace(/\.zip$/, "")}`, name), "utf8")).toBe(
        readFileSync(new URL(`../../../shared/channels/console/assets/${name}`, import.meta.url), "utf8"),
      );
  });
});

describe("cdk-nag on the HTTP API", () => {
  it("reports a route without an authorizer (the APIG4 acknowledgement answers a live rule)", () => {
    const stack = new Stack(new App(), "Bare");
    const handler = new LambdaFunction(stack, "Fn", {
      runtime: Runtime.NODEJS_24_X,
      handler: "index.handler",
      code: Code.fromInline("export const handler = async () => ({ statusCode: 200 });"),
    });
    const api = new HttpApi(stack, "Api");
    api.addRoutes({
      path: "/x",
      methods: [HttpMethod.GET],
      integration: new HttpLambdaIntegration("I", handler),
    });
    const rules = new AwsSolutionsChecks().validateScope(stack).violations.map((v) => v.ruleName);
    expect(rules).toContain("AwsSolutions-APIG4");
    expect(rules).toContain("AwsSolutions-APIG1"); // no access logs on a bare stage
  });
});
