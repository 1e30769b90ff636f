import type { LambdaClient } from "@aws-sdk/client-lambda";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import type { ToolContext } from "../../shared/ports/tools.ts";
import { lambdaFunctions } from "../../shared/runtime/engine-wiring.ts";
import type { LocalRuntime } from "../../shared/runtime/local/local.ts";
import { idempotencyKeyOf } from "../../shared/tools/service/call-record.ts";
import { parseToolsConfig } from "../../shared/tools/service/config.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { Harness } from "../scenarios/engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "../scenarios/scenarios.ts";
import { openToolWorld, type ToolWorld } from "../scenarios/tool-world.ts";

/**
 * Tools bound to AWS Lambda functions, with the real `@aws-sdk/client-lambda` client talking to a
 * local Invoke peer (test/peers/lambda-invoke.ts): what the function receives, what the model gets
 * back, how failures read, and an assistant calling one in a local run.
 */
const TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
const ASSISTANT = `${tenantUrn("acme")}/common.Assistant.a1`;
let calls = 0;
const ctx = (): ToolContext => ({ taskId: TASK, actor: ASSISTANT, callId: `call_${++calls}` });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const VENUE_PARAMETERS = {
  type: "object",
  properties: {
    city: { type: "string", minLength: 1 },
    people: { type: "integer", minimum: 1, maximum: 500 },
  },
  required: ["city", "people"],
  additionalProperties: false,
};

let peer: LambdaInvokePeer;
beforeAll(async () => {
  peer = await LambdaInvokePeer.start(
    {
      "find-venue": (event) => {
        const { city, people } = event as { city: string; people: number };
        return { venue: "Casa do Rio", city, seats: Math.max(40, people) };
      },
      "check-city": (event) => {
        const { city } = event as { city: string };
        if (city === "long") throw new RangeError("x".repeat(2_000));
        throw new TypeError(`${city} is not in Europe`);
      },
      "slow-report": async () => {
        await sleep(1_500);
        return "late";
      },
      "payroll-export": () => "never",
    },
    { denied: ["payroll-export"] },
  );
});
afterAll(async () => {
  await peer.close();
});

let world: ToolWorld;
let rt: LocalRuntime;
const madeFor: (string | undefined)[] = [];
beforeEach(async () => {
  world = await openToolWorld("arbor-lambda-");
  rt = world.rt;
  peer.invocations.length = 0;
  peer.abandoned.length = 0;
  madeFor.length = 0;
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await world.close();
});

/** The tool service with the real Lambda client pointed at the peer (unless `lambda` is false). */
function service(tools: Record<string, unknown>, lambda = true) {
  return ToolService.open(
    { tools },
    world.options({
      defaultTimeoutMs: 5_000,
      functions: lambdaFunctions(
        lambda
          ? (region: string | undefined): LambdaClient => {
              madeFor.push(region);
              return peer.client(region);
            }
          : undefined,
      ),
    }),
  );
}
const lambdaTool = (fn: string, extra: Record<string, unknown> = {}) => ({
  kind: "lambda",
  function: fn,
  description: "Finds a venue for a team",
  parameters: VENUE_PARAMETERS,
  ...extra,
});
const stages = async () =>
  (await rt.audit.forTask(TASK)).map((r) => `${r.tool}:${r.stage}${r.reason ? `:${r.reason}` : ""}`);

describe("a tool bound to a Lambda function", () => {
  it("invokes the function with exactly the arguments; the model gets its result; the call is audited", async () => {
    const tools = await service({
      find_venue: lambdaTool("find-venue", { qualifier: "live", region: "eu-west-1" }),
    });
    const [descriptor] = tools.describe(["find_venue"]);
    expect(descriptor).toEqual({
      name: "find_venue",
      kind: "lambda",
      description: "Finds a venue for a team",
      parameters: VENUE_PARAMETERS,
      risky: false,
      pure: false,
      namespace: "lambda", // none configured: its kind
    });

    const context = ctx();
    const result = await tools.execute("find_venue", { city: "Lisbon", people: 12 }, context);
    expect(result).toEqual({ content: '{"venue":"Casa do Rio","city":"Lisbon","seats":40}' });
    // The event is the arguments alone; the call's idempotency key and attempt are in the client context.
    expect(peer.invocations).toEqual([
      {
        functionName: "find-venue",
        name: "find-venue",
        qualifier: "live",
        region: "eu-west-1",
        invocationType: "RequestResponse",
        payload: { city: "Lisbon", people: 12 },
        clientContext: { custom: { idempotencyKey: idempotencyKeyOf(TASK, context.callId), attempt: 1 } },
      },
    ]);
    // Not pure: on record as requested before it ran, then completed.
    expect(await stages()).toEqual(["find_venue:requested", "find_venue:completed"]);
    const [, completed] = await rt.audit.forTask(TASK);
    expect(completed).toMatchObject({ actor: ASSISTANT, durationMs: expect.any(Number) });

    // The Tool resource says what the tool is bound to, not which function (settings stay in the file).
    const [urn] = (await tools.register("acme")).urns;
    const stored = await rt.resources.getAs("common.Tool", urn as string);
    expect(stored?.binding).toEqual({ kind: "lambda", config: {} });
  });

  it("invokes an ARN in its own region and a name:alias, with one client per region", async () => {
    const arn = "arn:aws:lambda:eu-central-1:123456789012:function:find-venue:v2";
    const tools = await service({
      by_arn: lambdaTool(arn),
      by_alias: lambdaTool("find-venue:prod", { region: "eu-west-1" }),
      also_eu_west: lambdaTool("find-venue", { region: "eu-west-1" }),
    });
    for (const name of ["by_arn", "by_alias", "also_eu_west"])
      expect((await tools.execute(name, { city: "Porto", people: 60 }, ctx())).isError).toBeUndefined();
    expect(peer.invocations.map((i) => [i.functionName, i.region, i.qualifier])).toEqual([
      [arn, "eu-central-1", "v2"],
      ["find-venue:prod", "eu-west-1", "prod"],
      ["find-venue", "eu-west-1", undefined],
    ]);
    expect(madeFor).toEqual(["eu-central-1", "eu-west-1"]);
  });

  it("never invokes the function with invalid arguments, and says what is wrong with them", async () => {
    const tools = await service({ find_venue: lambdaTool("find-venue") });
    const result = await tools.execute("find_venue", { people: 0, budget: 100 }, ctx());
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(
      /^Invalid arguments for find_venue: .*city: is required.*budget: is not a parameter of this tool.*people: must be >= 1/,
    );
    expect(peer.invocations).toEqual([]);
    expect(await stages()).toEqual(["find_venue:failed:invalid_arguments"]);
  });

  it("turns what the function threw into a tool error with its type and message, audited as failed", async () => {
    const tools = await service({ check_city: lambdaTool("check-city", { parameters: { type: "object" } }) });
    const result = await tools.execute("check_city", { city: "Lima" }, ctx());
    expect(result).toEqual({
      content:
        "check_city failed: the Lambda function check-city returned an error: TypeError: Lima is not in Europe",
      isError: true,
    });
    expect(peer.invocations.map((i) => i.payload)).toEqual([{ city: "Lima" }]);
    expect(await stages()).toEqual(["check_city:requested", "check_city:failed:error"]);

    // A long error is cut to its first 500 characters; the stack trace never reaches the model.
    const long = await tools.execute("check_city", { city: "long" }, ctx());
    expect(long.isError).toBe(true);
    expect(long.content).toBe(
      `check_city failed: the Lambda function check-city returned an error: ${`RangeError: ${"x".repeat(2_000)}`.slice(0, 500)}`,
    );
  });

  it("says what to check when the function does not exist or may not be invoked", async () => {
    const tools = await service({
      ghost: lambdaTool("no-such-function", { region: "eu-west-1" }),
      payroll: lambdaTool("payroll-export"),
    });
    const ghost = await tools.execute("ghost", { city: "Lisbon", people: 2 }, ctx());
    expect(ghost.isError).toBe(true);
    expect(ghost.content).toBe(
      "ghost failed: cannot invoke the Lambda function no-such-function in eu-west-1 (ResourceNotFoundException: " +
        "Function not found: arn:aws:lambda:eu-west-1:123456789012:function:no-such-function): " +
        "check tools.ghost.function (the name or ARN, and its version or alias) and the region it is in",
    );
    const payroll = await tools.execute("payroll", { city: "Lisbon", people: 2 }, ctx());
    expect(payroll.isError).toBe(true);
    expect(payroll.content).toMatch(
      /^payroll failed: cannot invoke the Lambda function payroll-export \(AccessDeniedException: .*not authorized to perform: lambda:InvokeFunction.*\): grant the role Arbor runs as lambda:InvokeFunction on that function$/,
    );
    expect(peer.invocations).toEqual([]); // neither ran
    expect(await stages()).toEqual([
      "ghost:requested",
      "ghost:failed:error",
      "payroll:requested",
      "payroll:failed:error",
    ]);
  });

  it("ends a call that takes longer than the tool's timeout, and drops the connection to the function", async () => {
    const tools = await service({
      report: lambdaTool("slow-report", { parameters: { type: "object" }, timeoutMs: 200 }),
    });
    const started = Date.now();
    const result = await tools.execute("report", {}, ctx());
    expect(result).toEqual({ content: "report did not finish within 200 ms", isError: true });
    expect(Date.now() - started).toBeLessThan(1_000);
    // The abort reached the SDK: it closed the request before the function answered.
    await vi.waitFor(() => expect(peer.abandoned).toEqual(["slow-report"]), { timeout: 1_000 });
    expect(await stages()).toEqual(["report:requested", "report:failed:timeout"]);
  });

  it("by default makes the SDK's own client, which reads the region, credentials and endpoint like any AWS tool", async () => {
    vi.stubEnv("AWS_REGION", "eu-north-1");
    vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDFROMENV");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-from-env");
    vi.stubEnv("AWS_ENDPOINT_URL_LAMBDA", peer.endpoint);
    const tools = await service({ find_venue: lambdaTool("find-venue") }, false);
    const result = await tools.execute("find_venue", { city: "Oslo", people: 8 }, ctx());
    expect(result.content).toBe('{"venue":"Casa do Rio","city":"Oslo","seats":40}');
    expect(peer.invocations).toMatchObject([{ name: "find-venue", region: "eu-north-1" }]);
  });
});

describe("lambda tool configuration", () => {
  const problems = (entry: Record<string, unknown>) => {
    try {
      parseToolsConfig({ tools: { x: entry } });
      return [];
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return (e as ValidationError).issues;
    }
  };
  const valid = { kind: "lambda", function: "find-venue", description: "d", parameters: { type: "object" } };

  it("accepts a name, a name with a version or alias, and an ARN in any partition", () => {
    for (const fn of [
      "find-venue",
      "find_venue:live",
      "find-venue:7",
      "find-venue:$LATEST",
      "arn:aws:lambda:us-east-1:123456789012:function:find-venue",
      "arn:aws:lambda:us-east-1:123456789012:function:find-venue:live",
      "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:find-venue",
      "arn:aws-cn:lambda:cn-north-1:123456789012:function:find-venue",
    ])
      expect([fn, problems({ ...valid, function: fn })]).toEqual([fn, []]);
    expect(problems({ ...valid, qualifier: "$LATEST", region: "ap-southeast-2", timeoutMs: 5_000 })).toEqual(
      [],
    );
  });

  it("names the bad field", () => {
    for (const fn of [
      "find venue",
      "find-venue:live:extra",
      "arn:aws:lambda:eu-west-1:1234:function:find-venue",
      "arn:aws:s3:::bucket",
      "x".repeat(65),
      "",
    ])
      expect(problems({ ...valid, function: fn })).toEqual([
        "tools.x.function: a Lambda function name (my-function), with a version or alias (my-function:live), " +
          "or its ARN (arn:aws:lambda:us-east-1:123456789012:function:my-function)",
      ]);
    expect(problems({ ...valid, parameters: {} })).toEqual([
      'tools.x.parameters: must be a JSON Schema with "type": "object"',
    ]);
    expect(problems({ ...valid, description: undefined }).join()).toMatch(/^tools\.x\.description: /);
    expect(problems({ ...valid, qualifier: "live now" })).toEqual([
      "tools.x.qualifier: $LATEST, a version number or an alias name",
    ]);
    expect(problems({ ...valid, function: "find-venue:live", qualifier: "prod" })).toEqual([
      "tools.x.qualifier: the function already names its version or alias (live): give it once",
    ]);
    expect(problems({ ...valid, region: "Europe" })).toEqual([
      "tools.x.region: an AWS region such as us-east-1",
    ]);
    expect(
      problems({
        ...valid,
        function: "arn:aws:lambda:eu-west-1:123456789012:function:find-venue",
        region: "us-east-1",
      }),
    ).toEqual([
      "tools.x.region: the function's ARN is in eu-west-1: a function is invoked in its own region (leave region out)",
    ]);
    expect(problems({ ...valid, payload: { fixed: true } }).join()).toMatch(/^tools\.x: .*"payload"/);
  });

  it("refuses parameters that are not a valid JSON Schema when the tool is configured", async () => {
    await expect(
      service({ x: { ...valid, parameters: { type: "object", properties: { a: { type: "nonsense" } } } } }),
    ).rejects.toThrow(/tools\.x: the parameters are not a valid JSON Schema/);
  });
});

describe("an assistant calling a Lambda function in a local run", () => {
  const SCOUT: AssistantDefinition[] = [
    { name: "Scout", id: "scout", purpose: "Find venues for team events", tools: ["find_venue"] },
  ];
  const lastToolResult = (r: LlmRequest) => [...r.messages].reverse().find((m) => m.role === "tool");
  /** The leaf asks the function for a venue, then answers with what it got. */
  const script: ScriptFunction = (r) => {
    if (isPlan(r)) return planOf({ name: "Find a venue", purpose: "Find a venue in Lisbon for 12 people" });
    if (isEvaluation(r)) return pass("done");
    const last = lastToolResult(r);
    if (!last) return { toolCalls: [{ name: "find_venue", arguments: { city: "Lisbon", people: 12 } }] };
    return { content: `Found: ${last.content}` };
  };

  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it("runs the function with the model's arguments and gives the model its result", async () => {
    // The local engine opens its tools with the SDK's default client: pointed at the peer the way an
    // operator points it at any Lambda endpoint (AWS_ENDPOINT_URL_LAMBDA), with dummy credentials.
    vi.stubEnv("AWS_REGION", "eu-west-1");
    vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDFROMENV");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-from-env");
    vi.stubEnv("AWS_ENDPOINT_URL_LAMBDA", peer.endpoint);
    h = await Harness.create({
      script,
      assistants: SCOUT,
      toolsConfig: { tools: { find_venue: lambdaTool("find-venue") } },
    });
    const { rootTaskId } = await h.submit("Find a venue in Lisbon for 12 people");
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toBe('Found: {"venue":"Casa do Rio","city":"Lisbon","seats":40}');
    expect(peer.invocations).toEqual([
      {
        functionName: "find-venue",
        name: "find-venue",
        region: "eu-west-1",
        invocationType: "RequestResponse",
        payload: { city: "Lisbon", people: 12 },
        clientContext: { custom: { idempotencyKey: expect.stringMatching(/^arbor-/), attempt: 1 } },
      },
    ]);
    const audit = await h.rt.audit.forTask(rootTaskId);
    expect(audit.map((r) => `${r.tool}:${r.stage}`)).toEqual([
      "find_venue:requested",
      "find_venue:completed",
    ]);
    expect(audit[0]?.actor).toBe("cld:common.Tenant.acme/common.Assistant.scout");
  });
});
