import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import type { EventBridgePeer } from "../peers/eventbridge-peer.ts";
import type { FakeBedrock } from "../peers/fake-bedrock.ts";
import type { LaggingIndex } from "../peers/lagging-dynamo.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import { type AwsWorld, apiGuard, EventBridgePlayer, guarded, startAwsWorld } from "./aws-world.ts";

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
const TOOL_FUNCTION = "arbor-day-one-tools";

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
const answer = planningModel({
  plan: PLAN,
  evaluation: { reason: "both", answer: ANSWER },
  leaf: ({ prompt, toolResult }) => {
    if (prompt.includes("# Task: Cost estimate"))
      return toolResult !== undefined
        ? { content: `Total: ${toolResult} EUR` }
        : { toolCalls: [{ name: "calculator", arguments: { a: 12, b: 20, op: "multiply" } }] };
    if (prompt.includes("# Task: Invitation"))
      return toolResult !== undefined
        ? { content: toolResult }
        : { toolCalls: [{ name: "send_email", arguments: EMAIL }] };
    throw new Error(`unexpected model request: ${prompt.slice(0, 200)}`);
  },
});

type Reply = {
  status: number;
  json: Record<string, unknown> & { error?: { code: string; message: string } };
};

describe("day 1 of a deployed stack, through the API function, on lagging indexes", () => {
  let world: AwsWorld;
  let peer: EventBridgePeer;
  let bedrock: FakeBedrock;
  let toolPeer: LambdaInvokePeer;
  let lagging: LaggingIndex;
  let config: AwsConfig;
  let rt: AwsRuntime;
  let api: ApiHandler;
  let tools: ToolHandler;
  let steps: StepHandler[];

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

  /** Plays EventBridge: each wave of events delivered at once, spread over the two step instances. */
  const { deliver, drain } = new EventBridgePlayer(
    () => world,
    BUS,
    () => steps,
  );

  beforeAll(async () => {
    // OPA, as deployed, on a policies bucket nobody has published a bundle to yet; the indexes lag.
    world = await startAwsWorld({
      name: "arbor-day-one",
      bus: BUS,
      model: answer,
      policies: "empty-bucket",
      lag: 8,
      env: {
        ARBOR_STAGE: "day-one",
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
        ARBOR_A2A_BLOCKING_WAIT_MS: "25000",
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
      },
    });
    ({ peer, config } = world);
    bedrock = world.bedrock as FakeBedrock;
    lagging = world.lagging as LaggingIndex;

    // Every function on the lagging table, each with its own runtime, as deployed.
    const clients = world.clients;
    const { s3, eventbridge } = clients;
    const { embeddings, s3vectors: s3v } = world.engineClients;
    tools = createToolHandler({
      config: () => config,
      clients,
      tools: { clients: { embeddings, s3vectors: s3v, s3 } },
    });
    toolPeer = await LambdaInvokePeer.start({ [TOOL_FUNCTION]: (event) => tools(event) });
    const engineClients = { ...world.engineClients, lambda: toolPeer.client() };
    api = guarded(
      apiGuard(world),
      createApiHandler({ config: () => config, clients, engine: { clients: engineClients } }),
    );
    const stepDeps = {
      config: () => config,
      clients,
      // A leaf's next turn goes out as a command, so the turn route runs through its function too.
      engine: { clients: engineClients, settings: { turnStepMs: 0 } },
    };
    steps = [createStepHandler(stepDeps), createStepHandler(stepDeps)];

    // The operator's first admin key, straight into the table (arbor keys add, ARBOR_MODE=aws).
    rt = createAwsRuntime(config, { s3, dynamodb: world.dynamodb, eventbridge });
    await new StateKeyStore(rt.state).add(root.entry);
  });

  afterAll(async () => {
    for (const s of steps ?? []) await s.close();
    await api?.close();
    await tools?.close();
    await toolPeer?.close();
    await rt?.close();
    await world?.close();
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
