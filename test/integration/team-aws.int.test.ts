import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import type { Assistant } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { Engine } from "../../shared/engine/engine.ts";
import { UnavailableError } from "../../shared/kernel/errors.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { createAwsEngine } from "../../shared/runtime/aws/aws-engine.ts";
import type { ConverseWireRequest } from "../peers/fake-bedrock.ts";
import { type AwsWorld, apiGuard, EventBridgePlayer, guarded, startAwsWorld } from "./aws-world.ts";

/**
 * Teams on the AWS adapters (S3 in s3rver, DynamoDB Local, S3 Vectors and Titan fakes, the fake
 * Bedrock), driven as EventBridge drives the step functions: a tenant's first request gets the
 * deployment's default team (ARBOR_TEAM_FILE) before it is planned, and the plan elects from it;
 * a team applied later retires what it drops (out of the vector index, never elected); with the
 * embeddings unavailable, a new tenant's request fails at once, saying why, and writes nothing.
 */
const BUS = "arbor-team-test";
const TEAM_FILE = join(import.meta.dirname, "../fixtures/team/team.json");
/** The support assistant's descriptors in the team file: a task described the same is elected to it. */
const SUPPORT = {
  purpose: "Answer customers' questions about orders, deliveries and returns",
  applicability: "Anything a customer asks about an order. Not for refunds above 100 EUR.",
};
const ALICE = { id: "user_alice", kind: "human" as const };

/** One task, described as the support assistant is: it is elected. */
function answer(request: ConverseWireRequest) {
  if (request.toolConfig?.toolChoice?.tool?.name === "create_plan")
    return {
      toolCalls: [{ name: "create_plan", arguments: { name: "Where is order 42", ...SUPPORT } }],
    };
  return { content: "Order 42 ships tomorrow." };
}

describe("teams on the AWS adapters", () => {
  let world: AwsWorld;
  let rt: AwsRuntime;
  let engine: Engine;
  let handler: StepHandler;

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-team",
      bus: BUS,
      model: answer,
      // What -c team=<file> sets on every deployed function.
      env: { ARBOR_TEAM_FILE: TEAM_FILE },
    });
    const { config, clients, engineClients } = world;
    expect(config.teamFile).toBe(TEAM_FILE);
    rt = createAwsRuntime(config, clients);
    engine = await createAwsEngine(rt, config, { clients: engineClients });
    handler = createStepHandler({ config: () => config, clients, engine: { clients: engineClients } });
  });

  afterAll(async () => {
    await handler?.close();
    await rt?.close();
    await world?.close();
  });

  /** Plays EventBridge until the bus is quiet. */
  const { drain } = new EventBridgePlayer(
    () => world,
    BUS,
    () => [handler],
    "one by one",
  );
  const assistantsOf = async (tenant: string) =>
    (await rt.resources.children(tenantUrn(tenant), "common.Assistant")) as Assistant[];
  const vectorsPut = () =>
    world.s3vectors.calls
      .filter((c) => c.operation === "PutVectors" && c.status === 200)
      .reduce((n, c) => n + (c.vectors ?? 0), 0);

  it("gives a tenant's first request the deployment's default team, and elects from it", async () => {
    expect(await assistantsOf("fresh")).toEqual([]);
    // As the API function takes a tenant's first request, held to its grants.
    const submitted = await guarded(apiGuard(world), () =>
      engine.submit({ tenant: "fresh", text: "Where is my order 42?", actor: ALICE }),
    )();
    // Registered before the request was accepted: in S3, and in S3 Vectors.
    expect((await assistantsOf("fresh")).map((a) => a.meta.hash).sort()).toEqual([
      "analyst",
      "generalist",
      "support",
    ]);
    expect(vectorsPut()).toBe(3);
    await drain();
    const root = await rt.tasks.view(submitted.rootTaskId);
    expect(root?.status).toBe("done");
    expect(root?.assistant).toBe(`${tenantUrn("fresh")}/common.Assistant.support`);

    // A second request registers nothing again.
    await engine.submit({ tenant: "fresh", text: "And order 43?", actor: ALICE });
    await drain();
    expect(
      world.s3vectors.calls.filter((c) => c.operation === "PutVectors" && (c.vectors ?? 0) === 3),
    ).toHaveLength(1);
  });

  it("retires what a team applied later drops: out of S3 Vectors, kept in S3, never elected", async () => {
    const team = {
      assistants: [
        {
          name: "Analyst",
          id: "analyst",
          purpose: "Work with numbers: budgets, costs, estimates, statistics",
          tools: ["calculator"],
        },
        {
          name: "Generalist",
          id: "generalist",
          purpose: "Handle any task no specialist fits, and combine results into one answer",
        },
      ],
    };
    // As the API function applies a team (PUT /v1/admin/team), held to its grants.
    const diff = await guarded(apiGuard(world), () => engine.applyTeam("fresh", team))();
    expect(diff.removed.map((e) => e.name)).toEqual(["Support agent"]);
    expect(diff.unchanged.map((e) => e.name).sort()).toEqual(["Analyst", "Generalist"]);
    expect(world.s3vectors.calls.some((c) => c.operation === "DeleteVectors" && c.status === 200)).toBe(true);
    const support = (await assistantsOf("fresh")).find((a) => a.meta.hash === "support");
    expect(support?.retiredAt).toBeDefined();
    // Applied again: nothing changes.
    const again = await engine.applyTeam("fresh", team);
    expect([again.added, again.changed, again.removed]).toEqual([[], [], []]);

    // The same request now: support is out of S3 Vectors, nobody else is similar enough, and a
    // person is asked to assign the task, with support not among the choices.
    const next = await engine.submit({ tenant: "fresh", text: "Where is order 44?", actor: ALICE });
    await drain();
    expect((await rt.resources.getAs("plan.Task", next.rootTaskId))?.election).toBeUndefined();
    const asked = await engine.pendingInteractions(next.rootTaskId, { actor: ALICE });
    expect(asked?.map((i) => i.purpose)).toEqual(["assign_subtask"]);
    const offered = (asked?.[0]?.options ?? []).map((o) => o.id).sort();
    expect(offered).toEqual([
      `${tenantUrn("fresh")}/common.Assistant.analyst`,
      `${tenantUrn("fresh")}/common.Assistant.generalist`,
    ]);
  });

  it("fails a new tenant's request at once, saying why, when its team cannot be registered; nothing is written", async () => {
    // A function just started (a process of its own): it has embedded nothing yet, so the default
    // team's descriptions go to Titan, whose answer is refused. One refused text fails the batch
    // (AccessDenied is not retried).
    const engine = await createAwsEngine(rt, world.config, { clients: world.engineClients });
    world.titan.failNext(1, { status: 403, type: "AccessDeniedException" });
    const refused = await engine.submit({ tenant: "unlucky", text: "Hello", actor: ALICE }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(UnavailableError);
    expect((refused as Error).message).toMatch(
      /Tenant unlucky has no assistants yet, and its default team could not be registered/,
    );
    expect(await rt.resources.descendantUrns(tenantUrn("unlucky"))).toEqual([]);
    expect(await rt.resources.get(tenantUrn("unlucky"))).toBeUndefined();
    // Once the embeddings answer again, the same request goes through.
    const ok = await engine.submit({ tenant: "unlucky", text: "Hello", actor: ALICE });
    expect(ok.rootTaskId).toMatch(/^cld:common\.Tenant\.unlucky\//);
    expect((await assistantsOf("unlucky")).length).toBe(3);
  });
});
