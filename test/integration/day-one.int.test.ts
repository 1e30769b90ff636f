import { randomBytes, randomUUID } from "node:crypto";
import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { CreateIndexCommand, CreateVectorBucketCommand, S3VectorsClient } from "@aws-sdk/client-s3vectors";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { StepTargetInput } from "../../infra/constructs/route-rule.ts";
import { VECTOR_INDEX } from "../../infra/constructs/vector-store.ts";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { bedrockClientConfig } from "../../shared/adapters/llm/bedrock-llm.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { newApiKey } from "../../shared/channels/api-keys.ts";
import { type AwsConfig, loadConfig } from "../../shared/config.ts";
import { ROUTES } from "../../shared/engine/routes.ts";
import { compilePattern } from "../../shared/event-pattern/index.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import { type EventBridgePeer, startEventBridgePeer } from "../peers/eventbridge-peer.ts";
import { type ConverseWireRequest, FakeBedrock } from "../peers/fake-bedrock.ts";
import { FakeBedrockEmbeddings } from "../peers/fake-bedrock-embeddings.ts";
import { FakeS3Vectors } from "../peers/fake-s3vectors.ts";
import { type LaggingIndex, laggingIndex } from "../peers/lagging-dynamo.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";

/**
 * Day 1 of a deployed stack, offline: everything a platform engineer and the first person do,
 * through the functions the engine stack deploys and nothing else.
 *
 *   - the first admin key is written into the state table (what `arbor keys add` does with
 *     ARBOR_MODE=aws); every other call is an API Gateway v2 event handed to the API function;
 *   - the admin makes a key for Ada and applies a team file (dry run, then for real);
 *   - Ada sends a lazy request; the step functions run on the events the API function published,
 *     fed as EventBridge feeds them (each rule's input template, two warm instances); every tool
 *     call goes through the tool function (Lambda Invoke, via the local invoke peer);
 *   - Ada reads the questions and answers them through the API: the plan, then a risky email;
 *   - the answer and the tree come back through the API; every event delivered again, in reverse,
 *     changes nothing and calls neither the model nor the email again.
 *
 * The peers are kinder than AWS, so two of AWS's ways are injected: the state table's indexes lag
 * (DynamoDB Local with reads of byParent and byStatus served from a few writes back), and the
 * policies bucket is empty, as on a fresh deploy (the built-in policy decides until a bundle is
 * published). Resources in s3rver, the model on the fake Bedrock, embeddings on the fake Titan, the
 * index on the fake S3 Vectors, all through the real SDK clients.
 */
const TENANT = "acme";
const BUS = "arbor-day-one";
const MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0";
const TOOL_FUNCTION = "arbor-day-one-tools";
const credentials = { accessKeyId: "test", secretAccessKey: "test" };
const suffix = randomBytes(4).toString("hex");

const root = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });

const COORDINATOR = {
  purpose: "Coordinate a small team event and combine its parts into one answer",
  evaluation: "The answer gives the total cost and says the invitation went out",
};
const ANALYST = {
  purpose: "Work out costs with arithmetic",
  instructions: "Use the calculator for every multiplication",
};
const WRITER = { purpose: "Write short invitations for colleagues and send them by email" };
const TEAM = {
  assistants: [
    { name: "Coordinator", id: "coordinator", ...COORDINATOR },
    { name: "Analyst", id: "analyst", ...ANALYST, tools: ["calculator"] },
    { name: "Writer", id: "writer", ...WRITER, tools: ["send_email"] },
  ],
};
const PLAN = {
  name: "Team lunch",
  ...COORDINATOR,
  subtasks: [
    { name: "Cost estimate", ...ANALYST },
    { name: "Invitation", ...WRITER },
  ],
};
const EMAIL = { to: "team@example.com", subject: "Team lunch", body: "Friday at noon, on the team." };
const ANSWER = "Lunch for 12 costs 240 EUR; the invitation went out.";

/** The model's side: one plan, two leaves (a calculation; an email, which is risky), one evaluation. */
function answer(request: ConverseWireRequest) {
  const forced = request.toolConfig?.toolChoice?.tool?.name;
  if (forced === "create_plan") return { toolCalls: [{ name: "create_plan", arguments: PLAN }] };
  if (forced === "report_evaluation")
    return {
      toolCalls: [{ name: "report_evaluation", arguments: { passed: true, reason: "both", answer: ANSWER } }],
    };
  const messages = request.messages ?? [];
  const prompt = messages[0]?.content?.[0]?.text ?? "";
  const result = messages.flatMap((m) => m.content ?? []).find((b) => b.toolResult)?.toolResult;
  const resultText = result?.content?.[0]?.text ?? "?";
  if (prompt.includes("# Task: Cost estimate"))
    return result
      ? { content: `Total: ${resultText} EUR` }
      : { toolCalls: [{ name: "calculator", arguments: { a: 12, b: 20, op: "multiply" } }] };
  if (prompt.includes("# Task: Invitation"))
    return result ? { content: resultText } : { toolCalls: [{ name: "send_email", arguments: EMAIL }] };
  throw new Error(`unexpected model request: ${prompt.slice(0, 200)}`);
}

type Reply = {
  status: number;
  json: Record<string, unknown> & { error?: { code: string; message: string } };
};

describe("day 1 of a deployed stack, through the API function, on lagging indexes", () => {
  let peer: EventBridgePeer;
  const bedrock = new FakeBedrock(answer);
  const titan = new FakeBedrockEmbeddings();
  const s3vectors = new FakeS3Vectors();
  let toolPeer: LambdaInvokePeer;
  let lagging: LaggingIndex;
  let config: AwsConfig;
  let rt: AwsRuntime;
  let api: ApiHandler;
  let tools: ToolHandler;
  let steps: StepHandler[];
  const closers: { destroy(): void }[] = [];
  const delivered = new Set<string>();
  const matchers = ROUTES.map((route) => ({ route, matches: compilePattern(route.pattern) }));

  const call = async (event: APIGatewayProxyEventV2): Promise<Reply> => {
    const res = await api(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return { status: res.statusCode, json: body ? JSON.parse(body) : {} };
  };
  const as = (key: string) => ({
    get: (path: string) => call(apiEvent("GET", path, { key })),
    post: (path: string, body: unknown) => call(apiEvent("POST", path, { key, body })),
    put: (path: string, body: unknown) => call(apiEvent("PUT", path, { key, body })),
  });
  const enc = (urn: string) => encodeURIComponent(urn);

  /** The step function's input for one route, rendered from the rule's own input template. */
  const stepInput = (subscription: string, event: BusEnvelope): unknown => {
    const { inputTemplate } = new StepTargetInput(subscription).bind(undefined as never);
    return JSON.parse(String(inputTemplate).replace("<aws.events.event.json>", () => JSON.stringify(event)));
  };
  const deliver = async (events: readonly BusEnvelope[]): Promise<number> => {
    const inputs = events.flatMap((e) =>
      matchers.filter((m) => m.matches(e)).map(({ route }) => stepInput(route.name, e)),
    );
    await Promise.all(inputs.map((input, i) => steps[i % steps.length]?.(input)));
    return inputs.length;
  };
  /** Plays EventBridge until the bus is quiet: every event accepted is delivered (at least) once. */
  const drain = async (): Promise<void> => {
    for (let wave = 0; wave < 100; wave++) {
      const fresh = peer.eventsOn(BUS).filter((e) => !delivered.has(e.id));
      if (fresh.length === 0) return;
      for (const e of fresh) delivered.add(e.id);
      await deliver(fresh);
    }
    throw new Error("the bus did not settle within 100 waves");
  };

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
      ARBOR_STAGE: "day-one",
      ARBOR_RESOURCES_BUCKET: `arbor-day-one-${suffix}`,
      ARBOR_TABLE_NAME: `arbor-day-one-${suffix}`,
      ARBOR_EVENT_BUS_NAME: BUS,
      ARBOR_VECTOR_BUCKET: `arbor-day-one-vectors-${suffix}`,
      ARBOR_VECTOR_INDEX: "resources-titan-v2-1024",
      ARBOR_MODEL_PROVIDER: "bedrock",
      ARBOR_MODEL: MODEL,
      // OPA, as deployed, on a policies bucket nobody has published a bundle to yet.
      ARBOR_POLICIES_BUCKET: `arbor-day-one-policies-${suffix}`,
      ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
      ARBOR_A2A_BLOCKING_WAIT_MS: "25000",
      ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
    });
    if (loaded.mode !== "aws" || !loaded.vectors) throw new Error("expected an aws configuration");
    config = loaded;
    const vectors = loaded.vectors;

    const s3 = new S3Client({
      region: "us-east-1",
      endpoint: inject("s3Endpoint"),
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    const dynamodb = new DynamoDBClient({
      region: "us-east-1",
      endpoint: inject("dynamoEndpoint"),
      credentials,
    });
    lagging = laggingIndex(dynamodb, { lag: 8 });
    const eventbridge = new EventBridgeClient({
      region: "us-east-1",
      endpoint: started.endpoint,
      credentials,
    });
    const bedrockClient = new BedrockRuntimeClient({
      region: "us-east-1",
      endpoint: bedrockEndpoint,
      credentials,
      ...bedrockClientConfig,
    });
    const embeddings = new BedrockRuntimeClient({
      region: "us-east-1",
      endpoint: titanEndpoint,
      credentials,
      maxAttempts: 1,
    });
    const s3v = new S3VectorsClient({ region: "us-east-1", endpoint: vectorsEndpoint, credentials });
    closers.push(s3, dynamodb, eventbridge, bedrockClient, embeddings, s3v);

    // What the storage and engine stacks create (the policies bucket stays empty).
    for (const bucket of [config.resourcesBucket, `arbor-day-one-policies-${suffix}`])
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await DynamoStateStore.ensureTable(dynamodb, config.tableName);
    await s3v.send(new CreateVectorBucketCommand({ vectorBucketName: vectors.bucket }));
    await s3v.send(
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

    // Every function on the lagging table, each with its own runtime, as deployed.
    const clients = { s3, dynamodb: lagging.client, eventbridge };
    tools = createToolHandler({
      config: () => config,
      clients,
      tools: { clients: { embeddings, s3vectors: s3v, s3 } },
    });
    toolPeer = await LambdaInvokePeer.start({ [TOOL_FUNCTION]: (event) => tools(event) });
    const engineClients = {
      bedrock: bedrockClient,
      embeddings,
      s3vectors: s3v,
      s3,
      lambda: toolPeer.client(),
    };
    api = createApiHandler({ config: () => config, clients, engine: { clients: engineClients } });
    const stepDeps = {
      config: () => config,
      clients,
      // A leaf's next turn goes out as a command, so the turn route runs through its function too.
      engine: { clients: engineClients, settings: { turnStepMs: 0 } },
    };
    steps = [createStepHandler(stepDeps), createStepHandler(stepDeps)];

    // The operator's first admin key, straight into the table (arbor keys add, ARBOR_MODE=aws).
    rt = createAwsRuntime(config, { s3, dynamodb, eventbridge });
    await new StateKeyStore(rt.state).add(root.entry);
  });

  afterAll(async () => {
    for (const s of steps ?? []) await s.close();
    await api?.close();
    await tools?.close();
    await toolPeer?.close();
    await rt?.close();
    for (const c of closers) c.destroy();
    await Promise.all([peer?.stop(), bedrock.stop(), titan.stop(), s3vectors.stop()]);
  });

  let ada: ReturnType<typeof as>;
  let rootTask: string;

  it("lets the admin make a key for a person and apply a team, with the change shown first", async () => {
    const admin = as(root.key);
    expect(await call(apiEvent("GET", "/healthz"))).toMatchObject({ status: 200 });
    const made = await admin.post("/v1/admin/keys", { id: "user_ada" });
    expect(made.status).toBe(201);
    ada = as(String(made.json.key));
    // A person's key cannot manage the team.
    expect((await ada.put("/v1/admin/team?dryRun=true", TEAM)).status).toBe(403);

    const dry = await admin.put("/v1/admin/team?dryRun=true", TEAM);
    expect(dry.status).toBe(200);
    expect(JSON.stringify(dry.json)).toContain("Coordinator");
    expect((await admin.get("/v1/admin/team")).json).not.toMatchObject({ team: TEAM });
    expect((await admin.put("/v1/admin/team", TEAM)).status).toBe(200);
    const shown = await admin.get("/v1/admin/team");
    expect(JSON.stringify(shown.json)).toContain('"Writer"');
  });

  it("takes a lazy request, plans it on the step functions and asks Ada to approve the plan", async () => {
    const sent = await ada.post("/v1/messages", {
      text: "Plan a team lunch for 12 people at 20 EUR each and invite everyone",
      mode: "lazy",
    });
    expect(sent.status).toBe(202);
    rootTask = String(sent.json.rootTaskId);

    await drain();
    const waiting = await ada.get(`/v1/tasks/${enc(rootTask)}/interactions`);
    expect(waiting.status).toBe(200);
    const questions = waiting.json.interactions as { urn: string; purpose: string }[];
    expect(questions.map((q) => q.purpose)).toEqual(["approve_plan"]);
    const [plan] = questions;
    expect(
      (await ada.post(`/v1/interactions/${enc(plan?.urn ?? "")}/answer`, { selectedOptionId: "approve" }))
        .status,
    ).toBe(204);
  });

  it("runs the plan, stops at the risky email for Ada, and sends it once she allows it", async () => {
    await drain();
    const waiting = await ada.get(`/v1/tasks/${enc(rootTask)}/interactions`);
    const questions = waiting.json.interactions as { urn: string; purpose: string }[];
    expect(questions.map((q) => q.purpose)).toEqual(["confirm_risky_action"]);
    // Nothing was sent before she allowed it.
    expect(toolPeer.invocations.filter((i) => JSON.stringify(i.payload).includes('"send_email"'))).toEqual(
      [],
    );
    const [email] = questions;
    expect(
      (await ada.post(`/v1/interactions/${enc(email?.urn ?? "")}/answer`, { selectedOptionId: "approve" }))
        .status,
    ).toBe(204);
    await drain();

    const result = await ada.get(`/v1/tasks/${enc(rootTask)}`);
    expect(result.status).toBe(200);
    expect(result.json).toMatchObject({ task: { status: "done" }, output: ANSWER });
    const tree = await ada.get(`/v1/tasks/${enc(rootTask)}/tree`);
    const node = tree.json.tree as {
      status: string;
      assistant?: { name: string };
      children: { title: string; status: string; assistant?: { name: string } }[];
    };
    expect(node).toMatchObject({ status: "done", assistant: { name: "coordinator" } });
    expect(node.children.map((c) => [c.title, c.status, c.assistant?.name]).sort()).toEqual([
      ["Cost estimate", "done", "analyst"],
      ["Invitation", "done", "writer"],
    ]);
    // Each tool call went to the tool function, once; the index did lag under this run.
    const executed = toolPeer.invocations
      .map((i) => i.payload as { op: string; tool?: string })
      .filter((p) => p.op === "ExecuteTool")
      .map((p) => p.tool);
    expect(executed.sort()).toEqual(["calculator", "send_email"]);
    expect(lagging.stats.stale).toBeGreaterThan(0);
  });

  it("changes nothing when EventBridge delivers every event again, out of order", async () => {
    lagging.settle();
    const before = await ada.get(`/v1/tasks/${enc(rootTask)}/tree`);
    const modelCalls = bedrock.calls.length;
    const toolCalls = toolPeer.invocations.length;
    await deliver([...peer.eventsOn(BUS)].reverse());
    await drain();
    lagging.settle();
    expect(await ada.get(`/v1/tasks/${enc(rootTask)}/tree`)).toEqual(before);
    expect(bedrock.calls.length).toBe(modelCalls);
    expect(toolPeer.invocations.length).toBe(toolCalls);
  });

  it("keeps other tenants out, and an unknown key out, at the front door", async () => {
    const other = newApiKey({ id: "user_eve", kind: "human", tenant: "globex", roles: ["admin"] });
    await new StateKeyStore(rt.state).add(other.entry);
    const eve = as(other.key);
    expect((await eve.get(`/v1/tasks/${enc(rootTask)}`)).status).toBe(404);
    expect((await eve.get(`/v1/tasks/${enc(rootTask)}/tree`)).status).toBe(404);
    expect((await as(`arbor_${randomBytes(24).toString("base64url")}`).get("/v1/admin/team")).status).toBe(
      401,
    );
  });
});
