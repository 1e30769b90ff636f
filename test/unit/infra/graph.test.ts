import { type CfnResource, Stack } from "aws-cdk-lib";
import type { IConstruct } from "constructs";
import { describe, expect, it } from "vitest";
import { GSI } from "../../../shared/adapters/aws/dynamo-schema.ts";
import { synthesized } from "../../fixtures/synth.ts";

/**
 * The graph tools run in the tool function on the state table (shared/graph/state-graph-store.ts):
 * the function is told the table, and its grants cover what the graph store does there: consistent
 * reads of the head and of triples, the listing of a tenant's triples on the byParent index, and
 * the transactions that write them (puts, deletes, condition checks).
 */
interface Statement {
  Sid?: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
}
const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

describe("the tool function can keep the graph", () => {
  const s = synthesized({ stage: "prod" });
  const resources = s.template.toJSON().Resources as Record<string, { Properties: Record<string, unknown> }>;
  const props = (c: IConstruct) =>
    resources[Stack.of(c).getLogicalId((c.node.defaultChild ?? c) as CfnResource)]?.Properties ?? {};
  const tools = s.engine.tools.handler;

  // The tool function runs the graph tools; the API function answers GET /v1/graph.
  for (const [name, fn] of [
    ["tool function", tools],
    ["API function", s.engine.api.function],
  ] as const)
    it(`${name}: is given the state table and may read and list it`, () => {
      const env = (props(fn.function) as { Environment: { Variables: Record<string, unknown> } }).Environment
        .Variables;
      expect(env.ARBOR_TABLE_NAME).toBeDefined();
      const grants = ((props(fn.role).ManagedPolicyArns ?? []) as { Ref: string }[]).flatMap(
        ({ Ref }) =>
          (resources[Ref]?.Properties.PolicyDocument as { Statement: Statement[] } | undefined)?.Statement ??
          [],
      );
      // Both read (the tool function's tools, the API's GET /v1/graph); the tool function writes the
      // graph's records (among its own: grants.ts).
      const reads = grants.find((g) => g.Sid === "StateReads");
      expect(list(reads?.Action ?? [])).toEqual(
        expect.arrayContaining(["dynamodb:GetItem", "dynamodb:Query"]),
      );
      expect(JSON.stringify(reads?.Resource)).toContain(`/index/${GSI.byParent.name}`);
      if (name === "tool function") {
        const writes = grants.find((g) => g.Sid === "OwnRecords");
        expect(list(writes?.Action ?? [])).toEqual(
          expect.arrayContaining(["dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"]),
        );
        expect(JSON.stringify(writes?.Condition)).toContain('"R#graph#*"');
      }
    });
});
