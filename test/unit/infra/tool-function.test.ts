import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { App } from "aws-cdk-lib";
import type { Template } from "aws-cdk-lib/assertions";
import { AwsSolutionsChecks } from "cdk-nag";
import type { IConstruct } from "constructs";
import { beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../../infra/app.ts";
import { ITEM_WRITES, TOOL_FUNCTION_GRANTS } from "../../../infra/constructs/grants.ts";
import { ENGINE_OUTPUT_KEYS, type EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { ROUTES } from "../../../shared/engine/routes.ts";
import { TOOL_CALL_MAX_MS, TOOL_FUNCTION_TIMEOUT_MS } from "../../../shared/ports/tool-function.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";
import { synthesized } from "../../fixtures/synth.ts";
import { deployedEnvironment, list, logicalId } from "../../support/cdk.ts";

/**
 * The tool function in the engine stack: the only function holding the tools' grants and
 * registry, called synchronously by the ready and turn steps, which hold nothing of the tools but
 * the right to call it; the functions that call the model otherwise hold none of it.
 */
const cdkJson = JSON.parse(readFileSync(new URL("../../../cdk.json", import.meta.url), "utf8")) as {
  context: Record<string, unknown>;
};
const REGISTRY = "test/fixtures/tools/deployed-tools.json";

interface Synthesized {
  app: App;
  engine: EngineStack;
  template: Template;
}
interface Fn {
  Timeout: number;
  MemorySize: number;
  Environment: { Variables: Record<string, unknown> };
  Code: { S3Key: string };
  DeadLetterConfig?: unknown;
}
interface Statement {
  Sid?: string;
  Action: string | string[];
  Resource: unknown;
}

/** The app as `cdk synth` makes it, once per test worker and context (test/fixtures/synth.ts). */
const synth = (context: Record<string, unknown>): Synthesized => synthesized(context);
const resources = (s: Synthesized) =>
  s.template.toJSON().Resources as Record<string, { Type: string; Properties: Record<string, unknown> }>;
const props = (s: Synthesized, c: IConstruct) => resources(s)[logicalId(c)]?.Properties ?? {};
const fnProps = (s: Synthesized, c: IConstruct) => props(s, c) as unknown as Fn;
const bundleOf = (s: Synthesized, c: IConstruct) =>
  join(s.app.outdir, `asset.${fnProps(s, c).Code.S3Key.replace(/\.zip$/, "")}`);
/** The statements of the managed policies attached to a role. */
function grantsOf(s: Synthesized, role: IConstruct): Statement[] {
  const arns = (props(s, role).ManagedPolicyArns ?? []) as { Ref: string }[];
  return arns.flatMap(({ Ref }) => {
    const document = resources(s)[Ref]?.Properties.PolicyDocument as { Statement: Statement[] } | undefined;
    return document?.Statement ?? [];
  });
}
const modelCallers = (s: Synthesized) => [
  ...ROUTES.map((r) => [r.name, s.engine.steps[r.name]] as const),
  ["watchdog", s.engine.watchdog] as const,
];

/** What CloudFormation puts in the variables the template computes (a Ref, the API's endpoint). */
const CFN_VALUES: Record<string, string> = {
  ARBOR_TOOL_FUNCTION: "arbor-prod-engine-Tools",
  ARBOR_PUBLIC_URL: "https://abc123.execute-api.eu-west-1.amazonaws.com",
};

let plain: Synthesized;
let withTools: Synthesized;
beforeAll(() => {
  plain = synth({ stage: "prod" });
  withTools = synth({ stage: "prod", tools: REGISTRY });
}, 600_000);

describe("the tool function", () => {
  it("runs functions/tool.ts with a timeout above any tool call's, and no retries or dead-letter queue (it is only called synchronously)", () => {
    for (const s of [plain, withTools]) {
      const fn = s.engine.tools.handler.function;
      expect(fnProps(s, fn)).toMatchObject({ Timeout: TOOL_FUNCTION_TIMEOUT_MS / 1000, MemorySize: 1024 });
      expect(TOOL_CALL_MAX_MS).toBeLessThan(TOOL_FUNCTION_TIMEOUT_MS);
      expect(fnProps(s, fn).DeadLetterConfig).toBeUndefined();
      s.template.hasResourceProperties("AWS::Lambda::EventInvokeConfig", {
        FunctionName: { Ref: logicalId(fn) },
        MaximumRetryAttempts: 0,
      });
      // Nobody invokes it through a resource policy (no rule, no schedule): only the roles granted below.
      const permissions = Object.values(resources(s)).filter((r) => r.Type === "AWS::Lambda::Permission");
      expect(JSON.stringify(permissions)).not.toContain(logicalId(fn));
    }
  });

  it("holds only its own grants: reads, writes of its own records, no delete but a retired tool's", () => {
    const roleProps = (
      plain.template.toJSON().Resources as Record<string, { Properties: Record<string, unknown> }>
    )[logicalId(plain.engine.tools.handler.role)]?.Properties as { ManagedPolicyArns: { Ref: string }[] };
    expect(roleProps.ManagedPolicyArns).toEqual([{ Ref: logicalId(plain.engine.toolDataPolicy) }]);
    const doc = (
      plain.template.toJSON().Resources as Record<string, { Properties: Record<string, unknown> }>
    )[logicalId(plain.engine.toolDataPolicy)]?.Properties.PolicyDocument as {
      Statement: { Sid: string; Action: string | string[]; Resource: unknown; Condition?: unknown }[];
    };
    // Exactly the grants of infra/constructs/grants.ts, in their order.
    expect(doc.Statement.map((s) => s.Sid)).toEqual(TOOL_FUNCTION_GRANTS.map((g) => g.sid));
    const actions = (sid: string) => list(doc.Statement.find((s) => s.Sid === sid)?.Action ?? []);
    // No delete of an object but a Tool resource's; item writes only on its own records' keys.
    for (const s of doc.Statement) {
      const resources = JSON.stringify(s.Resource);
      if (list(s.Action).includes("s3:DeleteObject"))
        expect(resources).toContain("/cld:common.Tenant.*/common.Tool.*");
      if (list(s.Action).includes("s3:PutObject")) expect(resources).not.toMatch(/\/\*"/);
      if (list(s.Action).some((a) => ITEM_WRITES.includes(a as (typeof ITEM_WRITES)[number])))
        expect(s.Condition).toEqual({
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": expect.arrayContaining(["S#audit#*", "R#toolregistry#*"]),
          },
        });
    }
    expect(actions("OwnRecords").sort()).toEqual([...ITEM_WRITES].sort());
    // What it may not: the model, a task's records, the engine's commands (but the turn it settles).
    const all = doc.Statement.flatMap((s) => list(s.Action));
    expect(all).not.toContain("bedrock:InvokeModelWithResponseStream");
    expect(JSON.stringify(doc.Statement)).not.toContain('"R#*"');
  });

  it("has the settings of aws mode but not the model's, and no tool function of its own", () => {
    const vars = fnProps(plain, plain.engine.tools.handler.function).Environment.Variables;
    expect(vars).not.toHaveProperty("ARBOR_MODEL");
    expect(vars).not.toHaveProperty("ARBOR_TOOL_FUNCTION");
    const env = deployedEnvironment(vars);
    const config = loadConfig({ ...env, AWS_REGION: "eu-west-1" });
    expect(config).toMatchObject({ mode: "aws", policy: { engine: "opa" } });
    expect(config).not.toHaveProperty("toolFunction");
    expect(config).not.toHaveProperty("model");
  });

  it("is named in the ready and turn steps' ARBOR_TOOL_FUNCTION, and nowhere else", () => {
    const ref = { Ref: logicalId(plain.engine.tools.handler.function) };
    for (const [name, fn] of modelCallers(plain)) {
      const vars = fnProps(plain, fn.function).Environment.Variables;
      const runsTools = ROUTES.find((r) => r.name === name)?.runsTools === true;
      expect([name, vars.ARBOR_TOOL_FUNCTION]).toEqual([name, runsTools ? ref : undefined]);
      if (!runsTools) continue;
      const env = deployedEnvironment(vars, CFN_VALUES, "from-cfn");
      expect(loadConfig({ ...env, AWS_REGION: "eu-west-1" })).toMatchObject({
        toolFunction: "arbor-prod-engine-Tools",
        publicUrl: CFN_VALUES.ARBOR_PUBLIC_URL,
      });
    }
  });

  it("has no public URL; the ready and turn steps have the API's, for the callbacks of A2A agents that push", () => {
    const apiUrl = plain.template.findOutputs(ENGINE_OUTPUT_KEYS.apiUrl)[ENGINE_OUTPUT_KEYS.apiUrl]?.Value;
    expect(apiUrl).toBeDefined();
    const toolVars = fnProps(plain, plain.engine.tools.handler.function).Environment.Variables;
    expect(toolVars).not.toHaveProperty("ARBOR_PUBLIC_URL");
    for (const [name, fn] of modelCallers(plain)) {
      const vars = fnProps(plain, fn.function).Environment.Variables;
      const runsTools = ROUTES.find((r) => r.name === name)?.runsTools === true;
      expect([name, vars.ARBOR_PUBLIC_URL]).toEqual([name, runsTools ? apiUrl : undefined]);
    }
  });

  it("is published as the output ToolFunctionName", () => {
    expect(plain.template.findOutputs(ENGINE_OUTPUT_KEYS.toolFunction)).toMatchObject({
      [ENGINE_OUTPUT_KEYS.toolFunction]: { Value: { Ref: logicalId(plain.engine.tools.handler.function) } },
    });
  });
});

describe("grants", () => {
  it("the ready and turn steps may invoke the tool function (that function only, unqualified); no other function may", () => {
    const { tools } = withTools.engine;
    const arn = { "Fn::GetAtt": [logicalId(tools.handler.function), "Arn"] };
    expect(props(withTools, tools.invokePolicy).PolicyDocument).toEqual({
      Version: "2012-10-17",
      Statement: [{ Sid: "ToolService", Effect: "Allow", Action: "lambda:InvokeFunction", Resource: arn }],
    });
    for (const [name, fn] of modelCallers(withTools)) {
      const invokes = grantsOf(withTools, fn.role).filter((st) =>
        list(st.Action).some((a) => a.startsWith("lambda:")),
      );
      const runsTools = ROUTES.find((r) => r.name === name)?.runsTools === true;
      expect([name, invokes.map((st) => st.Resource)]).toEqual([name, runsTools ? [arn] : []]);
    }
  });

  it("the steps and the watchdog hold no tool grant; the tool function holds them all", () => {
    const { toolPolicy, tools } = withTools.engine;
    expect(toolPolicy).toBeDefined();
    const toolGrant = { Ref: logicalId(toolPolicy as IConstruct) };
    for (const [name, fn] of modelCallers(withTools)) {
      expect([name, props(withTools, fn.role).ManagedPolicyArns]).not.toContainEqual(toolGrant);
      expect(JSON.stringify(grantsOf(withTools, fn.role))).not.toMatch(
        /quote-price|stock-level|shipping-rates/,
      );
    }
    expect(props(withTools, tools.handler.role).ManagedPolicyArns).toContainEqual(toolGrant);
    expect(JSON.stringify(grantsOf(withTools, tools.handler.role))).toMatch(/quote-price/);
    // Nor does the tool function call the model, or invoke itself.
    expect(grantsOf(withTools, tools.handler.role).map((st) => st.Sid)).not.toContain("Model");
    expect(grantsOf(withTools, tools.handler.role).map((st) => st.Sid)).not.toContain("ToolService");
  });

  it("the registry ships in the tool function's bundle only", () => {
    expect(readdirSync(bundleOf(withTools, withTools.engine.tools.handler.function))).toContain("tools.json");
    for (const [name, fn] of modelCallers(withTools))
      expect([name, readdirSync(bundleOf(withTools, fn.function)).includes("tools.json")]).toEqual([
        name,
        false,
      ]);
  });

  it("passes cdk-nag with the tool function in, with and without a registry", () => {
    for (const s of [plain, withTools])
      expect(new AwsSolutionsChecks(undefined, { verbose: true }).validateScope(s.app).violations).toEqual(
        [],
      );
  });
});

describe("the tool function's bundle", () => {
  it("loads on its own and answers bad input, then a missing environment, with the handler's messages", () => {
    const bundle = pathToFileURL(
      join(bundleOf(plain, plain.engine.tools.handler.function), "index.mjs"),
    ).href;
    const script = `
      const { handler } = await import(${JSON.stringify(bundle)});
      for (const input of [{ op: "Deploy" }, { op: "ListTools" }]) {
        try { await handler(input); process.stdout.write("no error\\n"); } catch (e) { process.stdout.write(e.name + ": " + e.message.split("\\n")[0] + "\\n"); }
      }`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      env: { PATH: process.env.PATH, POWERTOOLS_LOG_LEVEL: "SILENT" },
      encoding: "utf8",
    }).split("\n");
    expect(out[0]).toMatch(/^ValidationError: Invalid tool function input.*op/);
    expect(out[1]).toMatch(/^ConfigError: .*ARBOR_MODE=aws/);
  });
});

describe("a registry whose calls take longer than the tool function can answer", () => {
  it("is refused at synth, naming the tool and the limit", () => {
    const dir = mkdtempSync(join(tmpdir(), "arbor-tool-fn-"));
    const file = join(dir, "slow.json");
    writeFileSync(
      file,
      JSON.stringify({
        tools: {
          report: {
            kind: "http",
            url: "https://reports.example.com/run",
            description: "Runs the monthly report",
            parameters: { type: "object" },
            timeoutMs: 600_000,
          },
          quick: { kind: "builtin", function: "sha256", timeoutMs: TOOL_CALL_MAX_MS },
        },
      }),
    );
    let message = "";
    try {
      createApp({ context: { ...cdkJson.context, stage: "dev-slow", tools: file }, processEnv: {} });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(
      new RegExp(
        `tools\\.report\\.timeoutMs: 600000 is longer than a tool call may take on Lambda \\(${TOOL_CALL_MAX_MS} ms`,
      ),
    );
    expect(message).not.toContain("tools.quick");
  });
});
