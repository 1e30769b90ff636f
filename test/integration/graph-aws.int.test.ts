import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type {
  ExecuteToolResponse,
  ListToolsResponse,
} from "../../shared/tools/bindings/tool-function-protocol.ts";
import type { IamGuard } from "../support/iam-guard.ts";
import { type AwsWorld, guarded, startAwsWorld, toolFunctionGuard } from "./aws-world.ts";

/**
 * The graph tools on AWS as deployed: the tool function (functions/tool.ts) with the DynamoDB
 * graph store, on DynamoDB Local with a byParent index that lags 3 writes, OPA configured on a
 * policies bucket with no bundle yet (the built-in default policy decides). Two handlers stand for
 * two warm Lambda instances, each with its own memory: what one adds, the other finds.
 */
let world: AwsWorld;
let first: ToolHandler;
let second: ToolHandler;
let guard: IamGuard;
const GRAPH_TOOLS = ["graph_add", "graph_query", "graph_remove"];
const ACME_TASK = `${tenantUrn("acme")}/common.Conversation.c1/common.Message.m1/plan.Task.t1`;
const BETA_TASK = `${tenantUrn("beta")}/common.Conversation.c2/common.Message.m2/plan.Task.t2`;
const context = (taskId: string, n: number) => ({
  taskId,
  actor: `${taskId.split("/")[0]}/common.Assistant.a1`,
  callId: `call_${n}`,
  allowedTools: GRAPH_TOOLS,
});
const execute = async (handler: ToolHandler, tool: string, args: unknown, ctx: ReturnType<typeof context>) =>
  ((await handler({ op: "ExecuteTool", tool, arguments: args, context: ctx })) as ExecuteToolResponse).result;

beforeAll(async () => {
  world = await startAwsWorld({
    name: "arbor-graph",
    bus: "arbor-graph-bus",
    policies: "empty-bucket",
    lag: 3,
  });
  guard = toolFunctionGuard(world);
  const make = () =>
    guarded(
      guard,
      createToolHandler({
        config: () => world.config,
        clients: world.clients,
        tools: {
          clients: {
            embeddings: world.engineClients.embeddings,
            s3vectors: world.engineClients.s3vectors,
            s3: world.engineClients.s3,
          },
        },
      }),
    );
  [first, second] = [make(), make()];
}, 120_000);
afterAll(async () => {
  // The tool function kept to its grants on every path here (infra/constructs/grants.ts).
  expect(guard?.denied).toEqual([]);
  await first?.close();
  await second?.close();
  await world?.close();
});

describe("the graph tools in the tool function", () => {
  it("lists them, adds in one instance and finds in another, per tenant", async () => {
    const listed = (await first({ op: "ListTools" })) as ListToolsResponse;
    expect(listed.tools.map((t) => t.name)).toEqual(expect.arrayContaining(GRAPH_TOOLS));

    const added = await execute(
      first,
      "graph_add",
      {
        triples: [
          {
            subject: "https://example.org/ada",
            predicate: "schema:name",
            object: { value: "Ada", language: "en" },
          },
          { subject: ACME_TASK, predicate: "schema:about", object: "https://example.org/ada" },
        ],
      },
      context(ACME_TASK, 1),
    );
    expect(added).toEqual({ content: "Added 2 triples; the graph holds 2." });

    // The other instance lists the graph through the index, 3 writes behind: it never answers from
    // a stale listing (it waits, then says so), and answers once the index has caught up.
    const query = {
      patterns: [
        { subject: "?task", predicate: "schema:about", object: "?who" },
        { subject: "?who", predicate: "schema:name", object: "?name" },
      ],
    };
    const behind = await execute(second, "graph_query", query, context(ACME_TASK, 2));
    expect(behind).toMatchObject({
      isError: true,
      content: expect.stringMatching(/its index is behind: try again in a moment/),
    });
    world.lagging?.settle();
    const found = await execute(second, "graph_query", query, context(ACME_TASK, 2));
    expect(JSON.parse(found.content)).toEqual({
      results: [{ task: ACME_TASK, who: "https://example.org/ada", name: { value: "Ada", language: "en" } }],
      more: false,
    });

    const beta = await execute(
      second,
      "graph_query",
      { patterns: [{ subject: "?s", predicate: "?p", object: "?o" }] },
      context(BETA_TASK, 3),
    );
    expect(JSON.parse(beta.content)).toEqual({ results: [], more: false });
    const naming = await execute(
      first,
      "graph_add",
      { triples: [{ subject: ACME_TASK, predicate: "schema:name", object: { value: "mine now" } }] },
      context(BETA_TASK, 4),
    );
    expect(naming).toMatchObject({
      isError: true,
      content: expect.stringMatching(/not a resource of your tenant \(beta\)/),
    });

    const removed = await execute(
      first,
      "graph_remove",
      { patterns: [{ subject: "https://example.org/ada", predicate: "?p", object: "?o" }] },
      context(ACME_TASK, 5),
    );
    expect(removed.content).toBe("Removed 1 triple; the graph holds 1.");
  }, 60_000);
});
