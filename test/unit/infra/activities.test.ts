import { beforeAll, describe, expect, it } from "vitest";
import { ENGINE_OUTPUT_KEYS } from "../../../infra/stacks/engine-stack.ts";
import { COMMANDS, SOURCE } from "../../../shared/engine/context.ts";
import { ROUTES } from "../../../shared/engine/routes.ts";
import { type Synthesized, synthesized } from "../../fixtures/synth.ts";
import { logicalId } from "../../support/cdk.ts";

/**
 * The fire-and-forget activities' step on AWS (shared/engine/turn/activity-step.ts): its own rule on
 * the Arbor bus for ACTIVITY_REQUESTED, its own function, which may call the tool function (it
 * runs the call through it) and no model.
 */
let prod: Synthesized;
beforeAll(() => {
  prod = synthesized({ stage: "prod" });
}, 600_000);

type Res = { Type: string; Properties: Record<string, unknown> };
const resources = () => prod.template.toJSON().Resources as Record<string, Res>;

describe("the activity step", () => {
  it("has its own command queue for ACTIVITY_REQUESTED, consumed by its own function, and no rule", () => {
    const rules = Object.values(resources()).filter(
      (r) => r.Type === "AWS::Events::Rule" && r.Properties.Name === "activity",
    );
    expect(rules).toHaveLength(0);
    const queue = logicalId(prod.engine.commandQueues.activity.queue);
    const mappings = Object.values(resources()).filter(
      (r) =>
        r.Type === "AWS::Lambda::EventSourceMapping" &&
        JSON.stringify(r.Properties.EventSourceArn).includes(queue),
    );
    expect(mappings.map((m) => m.Properties.FunctionName)).toEqual([
      { Ref: logicalId(prod.engine.steps.activity.function) },
    ]);
    // The command goes there: the runtime maps its detail-type to the activity step's queue.
    expect(ROUTES.find((r) => r.name === "activity")?.pattern).toEqual({
      source: [SOURCE],
      "detail-type": [COMMANDS.activity],
    });
  });

  it("may call the tool function, and no model; its name is an output", () => {
    const fn = resources()[logicalId(prod.engine.steps.activity.function)] as Res;
    const vars = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(vars.ARBOR_TOOL_FUNCTION).toEqual({ Ref: logicalId(prod.engine.tools.handler.function) });
    // It waits on the tool function (up to 4 minutes): 5 minutes, as the steps that run tools.
    expect(fn.Properties).toMatchObject({ Timeout: 300, MemorySize: 512 });
    // Its own data rights and the right to invoke the tool function; no model, no command to send.
    const role = resources()[logicalId(prod.engine.steps.activity.role)] as Res;
    expect(role.Properties.ManagedPolicyArns).toEqual([
      { Ref: logicalId(prod.engine.stepDataPolicies.activity) },
      { Ref: logicalId(prod.engine.tools.invokePolicy) },
    ]);
    const outputs = prod.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs[ENGINE_OUTPUT_KEYS.activity]?.Value).toEqual({
      Ref: logicalId(prod.engine.steps.activity.function),
    });
  });
});
