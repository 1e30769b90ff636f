import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateIndexCommand, CreateVectorBucketCommand, S3VectorsClient } from "@aws-sdk/client-s3vectors";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { StepTargetInput } from "../../infra/constructs/route-rule.ts";
import { VECTOR_INDEX } from "../../infra/constructs/vector-store.ts";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { bedrockClientConfig } from "../../shared/adapters/llm/bedrock-llm.ts";
import { type AwsConfig, loadConfig } from "../../shared/config.ts";
import type { Assistant } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { Engine } from "../../shared/engine/engine.ts";
import { ROUTES } from "../../shared/engine/routes.ts";
import { UnavailableError } from "../../shared/errors.ts";
import { compilePattern } from "../../shared/event-pattern/index.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsClients, type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws.ts";
import { type AwsEngineClients, createAwsEngine } from "../../shared/runtime/aws-engine.ts";
import { type EventBridgePeer, startEventBridgePeer } from "../peers/eventbridge-peer.ts";
import { type ConverseWireRequest, FakeBedrock } from "../peers/fake-bedrock.ts";
import { FakeBedrockEmbeddings } from "../peers/fake-bedrock-embeddings.ts";
import { FakeS3Vectors } from "../peers/fake-s3vectors.ts";

/**
 * Teams on the AWS adapters (S3 in s3rver, DynamoDB Local, S3 Vectors and Titan fakes, the fake
 * Bedrock), driven as EventBridge drives the step functions: a tenant's first request gets the
 * deployment's default team (ARBOR_TEAM_FILE) before it is planned, and the plan elects from it;
 * a team applied later retires what it drops (out of the vector index, never elected); with the
 * embeddings unavailable, a new tenant's request fails at once, saying why, and writes nothing.
 */
const BUS = "arbor-team-test";
const MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0";
const TEAM_FILE = join(import.meta.dirname, "../fixtures/team/team.json");
/** The support assistant's descriptors in the team file: a task described the same is elected to it. */
const SUPPORT = {
  purpose: "Answer customers' questions about orders, deliveries and returns",
  applicability: "Anything a customer asks about an order. Not for refunds above 100 EUR.",
};
const credentials = { accessKeyId: "test", secretAccessKey: "test" };
const suffix = randomBytes(4).toString("hex");
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
  let peer: EventBridgePeer;
  const bedrock = new FakeBedrock(answer);
  const titan = new FakeBedrockEmbeddings();
  const s3vectors = new FakeS3Vectors();
  let config: AwsConfig;
  let clients: Required<AwsClients>;
  let engineClients: Required<Omit<AwsEngineClients, "lambda">>;
  let rt: AwsRuntime;
  let engine: Engine;
  let handler: StepHandler;
  const delivered = new Set<string>();
  const matchers = ROUTES.map((route) => ({ route, matches: compilePattern(route.pattern) }));

  beforeAll(async () => {
    const started = await startEventBridgePeer();
    peer = started.peer;
    const [bedrockEndpoint, titanEndpoint, vectorsEndpoint] = await Promise.all([
      bedrock.start().then((s) => s.endpoint),
      titan.start(),
      s3vectors.start(),
    ]);
    const loaded = loadConfig({
      ARBOR_MODE: "aws",
      AWS_REGION: "us-east-1",
      ARBOR_RESOURCES_BUCKET: `arbor-team-${suffix}`,
      ARBOR_TABLE_NAME: `arbor-team-${suffix}`,
      ARBOR_EVENT_BUS_NAME: BUS,
      ARBOR_VECTOR_BUCKET: `arbor-team-vectors-${suffix}`,
      ARBOR_VECTOR_INDEX: "resources-titan-v2-1024",
      ARBOR_MODEL_PROVIDER: "bedrock",
      ARBOR_MODEL: MODEL,
      ARBOR_POLICY_ENGINE: "cedar",
      // What -c team=<file> sets on every deployed function.
      ARBOR_TEAM_FILE: TEAM_FILE,
    });
    if (loaded.mode !== "aws" || !loaded.vectors)
      throw new Error("expected an aws configuration with vectors");
    config = loaded;
    expect(config.teamFile).toBe(TEAM_FILE);
    clients = {
      s3: new S3Client({
        region: "us-east-1",
        endpoint: inject("s3Endpoint"),
        forcePathStyle: true,
        credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
      }),
      dynamodb: new DynamoDBClient({ region: "us-east-1", endpoint: inject("dynamoEndpoint"), credentials }),
      eventbridge: new EventBridgeClient({ region: "us-east-1", endpoint: started.endpoint, credentials }),
    };
    engineClients = {
      bedrock: new BedrockRuntimeClient({
        region: "us-east-1",
        endpoint: bedrockEndpoint,
        credentials,
        ...bedrockClientConfig,
      }),
      embeddings: new BedrockRuntimeClient({
        region: "us-east-1",
        endpoint: titanEndpoint,
        credentials,
        maxAttempts: 1,
      }),
      s3vectors: new S3VectorsClient({ region: "us-east-1", endpoint: vectorsEndpoint, credentials }),
      s3: clients.s3 as S3Client,
    };
    await clients.s3.send(new CreateBucketCommand({ Bucket: config.resourcesBucket }));
    await DynamoStateStore.ensureTable(clients.dynamodb, config.tableName);
    const vectors = loaded.vectors;
    await engineClients.s3vectors.send(new CreateVectorBucketCommand({ vectorBucketName: vectors.bucket }));
    await engineClients.s3vectors.send(
      new CreateIndexCommand({
        vectorBucketName: vectors.bucket,
        indexName: vectors.index,
        dataType: VECTOR_INDEX.dataType,
        dimension: VECTOR_INDEX.dimension,
        distanceMetric: VECTOR_INDEX.distanceMetric,
        metadataConfiguration: { nonFilterableMetadataKeys: [...VECTOR_INDEX.nonFilterableMetadataKeys] },
        tags: { ...VECTOR_INDEX.tags },
      }),
    );
    rt = createAwsRuntime(config, clients);
    engine = await createAwsEngine(rt, config, { clients: engineClients });
    handler = createStepHandler({ config: () => config, clients, engine: { clients: engineClients } });
  });

  afterAll(async () => {
    await handler?.close();
    await rt?.close();
    for (const c of [...Object.values(clients ?? {}), ...Object.values(engineClients ?? {})]) c.destroy();
    await Promise.all([peer?.stop(), bedrock.stop(), titan.stop(), s3vectors.stop()]);
  });

  /** Plays EventBridge until the bus is quiet. */
  const drain = async (): Promise<void> => {
    for (let wave = 0; wave < 100; wave++) {
      const fresh = peer.eventsOn(BUS).filter((e) => !delivered.has(e.id));
      if (fresh.length === 0) return;
      for (const e of fresh) delivered.add(e.id);
      for (const event of fresh)
        for (const { route } of matchers.filter((m) => m.matches(event as BusEnvelope))) {
          const { inputTemplate } = new StepTargetInput(route.name).bind(undefined as never);
          await handler(
            JSON.parse(String(inputTemplate).replace("<aws.events.event.json>", () => JSON.stringify(event))),
          );
        }
    }
    throw new Error("the bus did not settle");
  };
  const assistantsOf = async (tenant: string) =>
    (await rt.resources.children(tenantUrn(tenant), "common.Assistant")) as Assistant[];
  const vectorsPut = () =>
    s3vectors.calls
      .filter((c) => c.operation === "PutVectors" && c.status === 200)
      .reduce((n, c) => n + (c.vectors ?? 0), 0);

  it("gives a tenant's first request the deployment's default team, and elects from it", async () => {
    expect(await assistantsOf("fresh")).toEqual([]);
    const submitted = await engine.submit({ tenant: "fresh", text: "Where is my order 42?", actor: ALICE });
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
      s3vectors.calls.filter((c) => c.operation === "PutVectors" && (c.vectors ?? 0) === 3),
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
    const diff = await engine.applyTeam("fresh", team);
    expect(diff.removed.map((e) => e.name)).toEqual(["Support agent"]);
    expect(diff.unchanged.map((e) => e.name).sort()).toEqual(["Analyst", "Generalist"]);
    expect(s3vectors.calls.some((c) => c.operation === "DeleteVectors" && c.status === 200)).toBe(true);
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
    // One refused text fails the batch (AccessDenied is not retried).
    titan.failNext(1, { status: 403, type: "AccessDeniedException" });
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
