import { readFileSync } from "node:fs";
import { App } from "aws-cdk-lib";
import type { Template } from "aws-cdk-lib/assertions";
import { AwsSolutionsChecks } from "cdk-nag";
import { flattenCfnReference } from "cdk-nag/lib/utils/flatten-cfn-reference.js";
import type { IConstruct } from "constructs";
import { beforeAll, describe, expect, it } from "vitest";
import { readChatSecret, SettingsError } from "../../../infra/app.ts";
import type { EngineStack } from "../../../infra/stacks/engine-stack.ts";
import { loadConfig } from "../../../shared/runtime/config.ts";
import { synthesized } from "../../fixtures/synth.ts";
import { list, logicalId } from "../../support/cdk.ts";

/**
 * Slack and Teams on the deployed stack: with `-c chatSecret` the HTTP API routes /slack/... and
 * /teams/... (POST) to the API function, and the API and notify functions, and they alone, may read
 * that one secret (and decrypt with its key, through Secrets Manager only); without it, no chat
 * route and no secret grant anywhere. The secret's value is never in a template.
 */
const ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:arbor/prod/chat-AbC123";
const KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab";

interface CfnRes {
  Type: string;
  Properties: Record<string, unknown>;
}
interface Statement {
  Sid?: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
}
interface Synthesized {
  app: App;
  engine: EngineStack;
  t: Template;
}

/** The engine stack of the app as infra/app.ts builds it (test/fixtures/synth.ts: once per context and worker). */
function synth(context: Record<string, unknown>): Synthesized {
  const { app, engine, template } = synthesized(context);
  return { app, engine, t: template };
}

const all = (t: Template, type: string) => Object.entries(t.findResources(type) as Record<string, CfnRes>);
const flat = (v: unknown) => flattenCfnReference(v);
const routeKeys = (t: Template) =>
  all(t, "AWS::ApiGatewayV2::Route")
    .map(([, r]) => r.Properties.RouteKey as string)
    .sort();
const envOf = (s: Synthesized, fn: IConstruct) =>
  (
    (all(s.t, "AWS::Lambda::Function").find(([id]) => id === logicalId(fn))?.[1].Properties.Environment as
      | { Variables: Record<string, unknown> }
      | undefined) ?? { Variables: {} }
  ).Variables;
/** The managed policies attached to each function's role, by the role's logical id. */
const rolePolicies = (s: Synthesized) =>
  Object.fromEntries(
    all(s.t, "AWS::IAM::Role").map(([id, r]) => [id, list(r.Properties.ManagedPolicyArns ?? []).map(flat)]),
  );
const statementsOf = (s: Synthesized) =>
  [...all(s.t, "AWS::IAM::ManagedPolicy"), ...all(s.t, "AWS::IAM::Policy")].flatMap(([policy, r]) =>
    ((r.Properties.PolicyDocument as { Statement: Statement[] }).Statement ?? []).map((st) => ({
      ...st,
      policy,
    })),
  );

let byArn: Synthesized;
let byName: Synthesized;
let none: Synthesized;

beforeAll(() => {
  // Bundling skipped for the two chat apps (only their templates matter here); the app without
  // chat is the one the other infra tests synthesize.
  const noBundling = { "aws:cdk:bundling-stacks": [] };
  byArn = synth({ stage: "prod", chatSecret: ARN, chatSecretKey: KEY, ...noBundling });
  byName = synth({ stage: "dev-chat", chatSecret: "arbor/dev/chat", ...noBundling });
  none = synth({ stage: "dev" });
}, 420_000);

describe("the chat routes", () => {
  it("are POST /slack/{proxy+} and POST /teams/{proxy+} on the API function's integration, with the secret", () => {
    for (const s of [byArn, byName]) {
      expect(routeKeys(s.t)).toEqual(
        [
          "ANY /v1/{proxy+}",
          "GET /.well-known/agent-card.json",
          "GET /console",
          "GET /console/{proxy+}",
          "GET /healthz",
          "POST /a2a",
          "POST /a2a/{proxy+}",
          "POST /console/{proxy+}",
          "POST /slack/{proxy+}",
          "POST /teams/{proxy+}",
        ].sort(),
      );
      const integrations = all(s.t, "AWS::ApiGatewayV2::Integration");
      expect(integrations).toHaveLength(1);
      const [integrationId] = integrations[0] as [string, CfnRes];
      for (const [, r] of all(s.t, "AWS::ApiGatewayV2::Route"))
        expect(flat(r.Properties.Target)).toBe(`integrations/${flat({ Ref: integrationId })}`);
    }
  });

  it("are not there without the secret: API Gateway answers those paths, the function is not invoked", () => {
    expect(routeKeys(none.t).filter((k) => /slack|teams/.test(k))).toEqual([]);
  });
});

describe("the chat secret", () => {
  it("is named to the API and notify functions (ARBOR_CHAT_SECRET_ARN), and to no other function", () => {
    for (const [s, id] of [
      [byArn, ARN],
      [byName, "arbor/dev/chat"],
    ] as const) {
      expect(envOf(s, s.engine.api.function.function).ARBOR_CHAT_SECRET_ARN).toBe(id);
      expect(envOf(s, s.engine.notify.handler.function).ARBOR_CHAT_SECRET_ARN).toBe(id);
      const others = all(s.t, "AWS::Lambda::Function")
        .filter(
          ([fid]) =>
            fid !== logicalId(s.engine.api.function.function) &&
            fid !== logicalId(s.engine.notify.handler.function),
        )
        .filter(([, f]) => JSON.stringify(f.Properties.Environment ?? {}).includes("ARBOR_CHAT_SECRET_ARN"));
      expect(others.map(([fid]) => fid)).toEqual([]);
    }
    for (const fn of all(none.t, "AWS::Lambda::Function"))
      expect(JSON.stringify(fn[1].Properties.Environment ?? {})).not.toContain("ARBOR_CHAT_SECRET_ARN");
  });

  it("may be read by those two only: GetSecretValue on that secret, kms:Decrypt on its key through Secrets Manager", () => {
    const s = byArn;
    const chat = s.engine.chat;
    expect(chat).toBeDefined();
    const chatPolicy = logicalId(chat?.policy as IConstruct);
    const secretStatements = statementsOf(s).filter((st) =>
      list(st.Action).some((a) => a.startsWith("secretsmanager:") || a.startsWith("kms:")),
    );
    expect(
      secretStatements.map(({ policy, Sid, Action, Resource, Condition }) => ({
        policy,
        Sid,
        Action,
        Resource: flat(Resource),
        Condition,
      })),
    ).toEqual([
      {
        policy: chatPolicy,
        Sid: "ChatSettings",
        Action: "secretsmanager:GetSecretValue",
        Resource: ARN,
        Condition: undefined,
      },
      {
        policy: chatPolicy,
        Sid: "ChatSettingsKey",
        Action: "kms:Decrypt",
        Resource: KEY,
        Condition: {
          StringEquals: {
            "kms:ViaService": {
              "Fn::Join": ["", ["secretsmanager.", { Ref: "AWS::Region" }, ".amazonaws.com"]],
            },
          },
        },
      },
    ]);
    const roles = rolePolicies(s);
    const holders = Object.entries(roles)
      .filter(([, arns]) => arns.includes(flat({ Ref: chatPolicy })))
      .map(([id]) => id)
      .sort();
    expect(holders).toEqual(
      [logicalId(s.engine.api.function.role), logicalId(s.engine.notify.handler.role)].sort(),
    );
  });

  it("given by name, is granted as <name>-?????? in the stack's account and region, nothing wider", () => {
    const grants = statementsOf(byName).filter((st) =>
      list(st.Action).some((a) => a.startsWith("secretsmanager:")),
    );
    expect(grants.map((g) => [g.Action, flat(g.Resource)])).toEqual([
      [
        "secretsmanager:GetSecretValue",
        "arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:arbor/dev/chat-??????",
      ],
    ]);
    expect(statementsOf(byName).some((st) => list(st.Action).some((a) => a.startsWith("kms:")))).toBe(false);
  });

  it("allows every call the chat settings loader makes (and it makes GetSecretValue only)", () => {
    const source = readFileSync(new URL("../../../shared/runtime/aws/aws-chat.ts", import.meta.url), "utf8");
    const commands = new Set([...source.matchAll(/\b([A-Z][A-Za-z0-9]*Command)\b/g)].map((m) => m[1]));
    expect([...commands]).toEqual(["GetSecretValueCommand"]);
    const granted = statementsOf(byArn).flatMap((st) => list(st.Action));
    expect(granted).toContain("secretsmanager:GetSecretValue");
  });

  it("is granted to nobody without -c chatSecret", () => {
    expect(none.engine.chat).toBeUndefined();
    expect(
      statementsOf(none).filter((st) =>
        list(st.Action).some((a) => a.startsWith("secretsmanager:") || a === "kms:Decrypt"),
      ),
    ).toEqual([]);
  });

  it("keeps cdk-nag clean (the by-name wildcard acknowledged, for that one secret)", () => {
    for (const { app } of [byArn, byName, none])
      expect(new AwsSolutionsChecks(undefined, { verbose: true }).validateScope(app).violations).toEqual([]);
  });

  it("gives the functions a setting their config reads", () => {
    const aws = {
      ARBOR_MODE: "aws",
      AWS_REGION: "eu-west-1",
      ARBOR_RESOURCES_BUCKET: "b",
      ARBOR_TABLE_NAME: "t",
      ARBOR_EVENT_BUS_NAME: "e",
      ARBOR_POLICY_ENGINE: "cedar",
    };
    for (const id of [ARN, "arbor/dev/chat"])
      expect(loadConfig({ ...aws, ARBOR_CHAT_SECRET_ARN: id })).toMatchObject({ chat: { secretId: id } });
  });
});

describe("the chat context", () => {
  const read = (context: Record<string, unknown>) => readChatSecret(new App({ context }));

  it("takes a complete ARN or a name, and a KMS key with it", () => {
    expect(read({})).toBeUndefined();
    expect(read({ chatSecret: ARN, chatSecretKey: KEY })).toEqual({ secret: ARN, key: KEY });
    expect(read({ chatSecret: "arbor/prod/chat" })).toEqual({ secret: "arbor/prod/chat" });
  });

  it("refuses anything else, naming the key to fix", () => {
    // A partial ARN (without the six characters) could match another secret's name: refused.
    expect(() => read({ chatSecret: ARN.slice(0, -7) })).toThrow(/complete ARN.*chatSecret/s);
    expect(() => read({ chatSecret: "two words" })).toThrow(SettingsError);
    expect(() => read({ chatSecret: "arn:aws:s3:::bucket" })).toThrow(/chatSecret/);
    expect(() => read({ chatSecret: ARN, chatSecretKey: "alias/mine" })).toThrow(/chatSecretKey/);
    expect(() => read({ chatSecretKey: KEY })).toThrow(/chatSecretKey goes with chatSecret/);
  });
});
