import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { createWatchdogHandler, type WatchdogHandler } from "../../functions/watchdog.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { COMMANDS } from "../../shared/engine/context.ts";
import type { RemoteCall } from "../../shared/engine/turn/remote-calls.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import { type A2aAgentPeer, startA2aAgent } from "../peers/a2a-agent.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import { guardedFetch } from "../scenarios/tool-world.ts";
import type { IamGuard } from "../support/iam-guard.ts";
import {
  type AwsWorld,
  apiGuard,
  EventBridgePlayer,
  guarded,
  startAwsWorld,
  toolFunctionGuard,
  watchdogGuard,
} from "./aws-world.ts";

/**
 * Arbor as an A2A client of an agent that offers push, on AWS, offline: the turn step (through
 * ToolFunctionPort) makes and records the callback under the API's public URL and sends it with the
 * call; the tool function (functions/tool.ts, behind the Lambda Invoke peer, the real SDK client)
 * gives it to the agent (test/peers/a2a-agent.ts, `push: true`) and answers `pending`; the turn
 * ends with nothing running. The agent's push goes to "API Gateway" (a node:http server on
 * loopback that hands each request to the API function as the HTTP API's payload 2.0 event), whose
 * callback route settles the call through the tool function (SettleTool) and sends the leaf's next
 * turn, which EventBridge (EventBridgePlayer) delivers to the step functions. Without a push, the
 * watchdog leaves the leaf until the call's deadline, then re-drives it, and the turn step has the
 * tool function ask the agent once (GetTask).
 *
 * The peers: DynamoDB Local, s3rver, the EventBridge peer, the Lambda Invoke peer, fake Bedrock,
 * Titan and S3 Vectors. Every function on one clock the test moves on (`wait`).
 */
const BUS = "arbor-a2a-push-aws";
const TOOL_FUNCTION = "arbor-push-tools";
const TENANT = "acme";
/** The call's deadline is this far off; the watchdog's staleness is shorter, so it meets a waiting leaf. */
const CALL_TIMEOUT_MS = 200_000;
const STALE_MS = 60_000;
const admin = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });

const COORDINATOR = {
  purpose: "Coordinate a small team event and combine its parts into one answer",
  evaluation: "The answer names a venue",
};
const ORGANISER = { purpose: "Find venues for team events with the venue desk" };
const TEAM = {
  assistants: [
    { name: "Coordinator", id: "coordinator", ...COORDINATOR },
    { name: "Organiser", id: "organiser", ...ORGANISER, tools: ["venue_desk", "plain_desk"] },
  ],
};
const ASK = "A venue in Lisbon for 12 people";
/** The tool the leaf calls: the agent that pushes, or one whose card does not offer push. */
let desk: "venue_desk" | "plain_desk" = "venue_desk";

/** The model: a plan with one part (the venue), the part's call to the venue desk, then its answer. */
const model = planningModel({
  plan: { name: "Team event", ...COORDINATOR, subtasks: [{ name: "Find a venue", ...ORGANISER }] },
  evaluation: { reason: "it names one" },
  leaf: ({ toolResult }) =>
    toolResult === undefined
      ? { toolCalls: [{ name: desk, arguments: { message: ASK } }] }
      : { content: `The venue desk says: ${toolResult.split("\n")[0]}` },
});

describe("an A2A agent that pushes, on AWS: the turn ends, the push at the API function resumes the leaf", () => {
  let world: AwsWorld;
  let agent: A2aAgentPeer;
  let plain: A2aAgentPeer;
  let toolPeer: LambdaInvokePeer;
  let gateway: Server;
  let gatewayUrl: string;
  let config: AwsConfig;
  let rt: AwsRuntime;
  let api: ApiHandler;
  let tools: ToolHandler;
  let guard: IamGuard;
  let watchdog: WatchdogHandler;
  let steps: StepHandler[];
  let dir: string;
  /** How far every function's clock is ahead of the wall clock (time the test let pass). */
  let skew = 0;
  const clock = () => new Date(Date.now() + skew);

  const { drain, events } = new EventBridgePlayer(
    () => world,
    BUS,
    () => steps,
  );

  const call = async (event: APIGatewayProxyEventV2) => {
    const res = await api(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return { status: res.statusCode, json: (body ? JSON.parse(body) : {}) as Record<string, unknown> };
  };

  /** Submits a request and plays EventBridge until the bus is quiet: the leaf's turn has ended. */
  async function handedOff() {
    const sent = await call(apiEvent("POST", "/v1/messages", { key: admin.key, body: { text: ASK } }));
    expect(sent.status).toBe(202);
    const rootTaskId = String(sent.json.rootTaskId);
    await drain();
    const [leaf] = await rt.tasks.children(rootTaskId);
    const leafId = leaf?.taskId ?? "";
    const send = agent.requests.filter((r) => r.rpcMethod === "SendMessage").at(-1);
    const remoteTaskId = [...agent.pushConfigs.keys()].at(-1) as string;
    return { rootTaskId, leafId, send, remoteTaskId };
  }
  const pendingCalls = async () => (await rt.state.byStatus<RemoteCall>("remote-call", "pending")).items;
  const toolResults = async (taskId: string) =>
    (await rt.resources.children(taskId, "common.Message")).filter((m) => m.meta.name.includes("-tool-"));
  const audit = async (taskId: string) => (await rt.audit.forTask(taskId)).map((r) => `${r.tool}:${r.stage}`);
  const invoked = (op: string) =>
    toolPeer.invocations.filter((i) => (i.payload as { op?: string } | null)?.op === op).length;

  beforeAll(async () => {
    // Far off: each test finishes the remote task itself (agent.finish), or lets it run.
    agent = await startA2aAgent({ push: true, backgroundMs: 600_000 });
    agent.behaviour = "background";
    plain = await startA2aAgent();
    plain.behaviour = "task";
    // API Gateway's HTTP API on loopback: each request to the API function as a payload 2.0 event.
    gateway = createServer(async (req, res) => {
      let text = "";
      for await (const chunk of req) text += chunk;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers[k] = v;
      const { host: _host, "content-length": _length, ...forwarded } = headers;
      const event = apiEvent(req.method ?? "GET", req.url ?? "/", {
        headers: forwarded,
        ...(text ? { body: JSON.parse(text) as unknown } : {}),
      });
      const out = await api(event, { awsRequestId: randomUUID() });
      res.writeHead(out.statusCode, (out.headers ?? {}) as Record<string, string>);
      res.end(out.isBase64Encoded ? Buffer.from(out.body, "base64") : out.body);
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;

    // The tool function's registry, bundled with it on a deployed stack.
    dir = mkdtempSync(join(tmpdir(), "arbor-a2a-push-aws-"));
    const toolsFile = join(dir, "tools.json");
    writeFileSync(
      toolsFile,
      JSON.stringify({
        tools: {
          venue_desk: { kind: "a2a", url: agent.url, timeoutMs: CALL_TIMEOUT_MS },
          plain_desk: { kind: "a2a", url: plain.url, timeoutMs: CALL_TIMEOUT_MS },
        },
      }),
    );
    world = await startAwsWorld({
      name: "arbor-a2a-push",
      bus: BUS,
      model,
      env: {
        ARBOR_TENANT: TENANT,
        ARBOR_STAGE: "a2a-push-test",
        // The API's endpoint: the API function's (its agent card) and the ready and turn steps'.
        ARBOR_PUBLIC_URL: gatewayUrl,
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
        ARBOR_TOOLS_FILE: toolsFile,
        ARBOR_WATCHDOG_STALE_MS: String(STALE_MS),
      },
    });
    ({ config } = world);
    const clients = world.clients;
    const { embeddings, s3vectors, s3 } = world.engineClients;
    // The agent is on loopback: the tool function's outbound guard lets loopback through (tests only).
    guard = toolFunctionGuard(world);
    tools = guarded(
      guard,
      createToolHandler({
        config: () => config,
        clients,
        tools: { clients: { embeddings, s3vectors, s3 }, fetch: guardedFetch, clock },
      }),
    );
    toolPeer = await LambdaInvokePeer.start({ [TOOL_FUNCTION]: (event) => tools(event) });
    const engineClients = { ...world.engineClients, lambda: toolPeer.client() };
    api = guarded(
      apiGuard(world),
      createApiHandler({ config: () => config, clients, engine: { clients: engineClients, clock } }),
    );
    const stepDeps = {
      config: () => config,
      clients,
      engine: { clients: engineClients, settings: { turnStepMs: 0 }, clock },
    };
    steps = [createStepHandler(stepDeps), createStepHandler(stepDeps)];
    // As deployed, the watchdog has neither the tool function nor the registry (it runs no tool).
    const { toolFunction: _fn, toolsFile: _file, ...watchdogConfig } = config;
    watchdog = guarded(
      watchdogGuard(world),
      createWatchdogHandler({
        config: () => watchdogConfig,
        clients,
        engine: { clients: world.engineClients, clock },
      }),
    );

    rt = createAwsRuntime(config, clients);
    await new StateKeyStore(rt.state).add(admin.entry);
    expect((await call(apiEvent("PUT", "/v1/admin/team", { key: admin.key, body: TEAM }))).status).toBe(200);
  }, 120_000);

  afterAll(async () => {
    // The tool function kept to its grants on every path here (infra/constructs/grants.ts).
    expect(guard?.denied).toEqual([]);
    for (const s of steps ?? []) await s.close();
    await watchdog?.close();
    await api?.close();
    await tools?.close();
    await toolPeer?.close();
    await rt?.close();
    await agent?.close();
    await plain?.close();
    gateway?.closeAllConnections();
    await new Promise((r) => gateway?.close(r));
    await world?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("hands the call off with a callback under the API's URL; the push settles it once and the request completes", async () => {
    const { rootTaskId, leafId, send, remoteTaskId } = await handedOff();
    // The tool function sent the turn step's callback, with returnImmediately.
    const configuration = (send?.params as { configuration?: Record<string, unknown> } | undefined)
      ?.configuration;
    expect(configuration).toMatchObject({
      returnImmediately: true,
      taskPushNotificationConfig: {
        url: expect.stringMatching(new RegExp(`^${gatewayUrl}/v1/a2a-callbacks/[A-Za-z0-9_-]{24}$`)),
        authentication: { scheme: "Bearer" },
      },
    });
    const token = agent.pushConfigs.get(remoteTaskId)?.token as string;

    // The bus is quiet and the call has no outcome: the turn ended, nothing waits on the agent.
    expect((await rt.tasks.view(rootTaskId))?.status).toBe("in_progress");
    expect((await rt.tasks.view(leafId))?.status).toBe("in_progress");
    expect(await toolResults(leafId)).toEqual([]);
    expect(await audit(leafId)).toEqual(["venue_desk:requested"]);
    const [pending] = (await pendingCalls()).filter((c) => c.data.taskId === leafId);
    expect(pending?.data).toMatchObject({ slot: "turn-0001-tool-0", tool: "venue_desk" });
    expect(pending?.data.pending?.remoteTaskId).toBe(remoteTaskId);
    expect(JSON.stringify(pending)).not.toContain(token); // only its hash is kept
    // The callback crossed to the tool function in the ExecuteTool request, not back.
    expect(invoked("ExecuteTool")).toBe(1);

    // The watchdog leaves a leaf that waits on a remote call before its deadline, however stale
    // (it drives the stale root again, which has a child still running: nothing comes of it).
    const turnsOfLeaf = () =>
      events().filter(
        (e) => e["detail-type"] === COMMANDS.turn && (e.detail as { taskId?: string }).taskId === leafId,
      ).length;
    const turns = turnsOfLeaf();
    skew += STALE_MS + 1_000;
    await watchdog();
    await drain();
    expect(turnsOfLeaf()).toBe(turns);
    expect(await audit(leafId)).toEqual(["venue_desk:requested"]);
    expect(invoked("ExecuteTool")).toBe(1);
    expect(invoked("SettleTool")).toBe(0);
    skew -= STALE_MS + 1_000;

    // The agent completes and pushes to the API's endpoint: settled, and the leaf's next turn is sent.
    await agent.finish(remoteTaskId);
    expect(agent.pushes.at(-1)).toMatchObject({ status: 200, answer: { status: "settled" } });
    expect(invoked("SettleTool")).toBe(1);
    await drain();
    expect((await rt.tasks.view(rootTaskId))?.status).toBe("done");
    const [result] = await toolResults(leafId);
    expect(result && "content" in result ? result.content : "").toContain(
      `Venues for "${ASK}": Casa do Rio (40 seats), Sala Norte (16 seats).`,
    );
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
    // Only SendMessage went to the agent: no polling, no GetTask.
    expect(agent.requests.filter((r) => r.rpcMethod).map((r) => r.rpcMethod)).toEqual(["SendMessage"]);

    // The same push again changes nothing: one result, one completion.
    expect(await agent.push(remoteTaskId)).toEqual({ status: 200, answer: { status: "already-settled" } });
    await drain();
    expect(await toolResults(leafId)).toHaveLength(1);
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
  });

  it("answers a push with a wrong or missing token 401, and changes nothing", async () => {
    const { leafId, remoteTaskId } = await handedOff();
    const before = await pendingCalls();
    const settles = invoked("SettleTool");
    const wrong = await agent.push(remoteTaskId, { token: "not-the-token" });
    expect(wrong.status).toBe(401);
    expect(wrong.answer).toMatchObject({ error: { code: "UNAUTHENTICATED" } });
    expect((await agent.push(remoteTaskId, { token: null })).status).toBe(401);
    // The right token, a task of someone else: 400 (the tool function read it), nothing written.
    const other = await agent.push(remoteTaskId, {
      body: { task: { id: "another-task", contextId: "c", status: { state: "TASK_STATE_COMPLETED" } } },
    });
    expect(other.status).toBe(400);
    expect(other.answer).toMatchObject({ error: { code: "VALIDATION" } });
    await drain();
    expect(await pendingCalls()).toEqual(before);
    expect(await toolResults(leafId)).toEqual([]);
    expect(await audit(leafId)).toEqual(["venue_desk:requested"]);
    expect(invoked("SettleTool")).toBe(settles + 1); // the 401s never reached it
    // Let it end, so the next test starts from a quiet world.
    await agent.finish(remoteTaskId);
    await drain();
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
  });

  it("an agent whose card does not offer push is waited on as before; the unused callback is no wait", async () => {
    desk = "plain_desk";
    try {
      const sent = await call(apiEvent("POST", "/v1/messages", { key: admin.key, body: { text: ASK } }));
      const rootTaskId = String(sent.json.rootTaskId);
      await drain();
      expect((await rt.tasks.view(rootTaskId))?.status).toBe("done");
      const [leaf] = await rt.tasks.children(rootTaskId);
      const leafId = leaf?.taskId ?? "";
      expect(await audit(leafId)).toEqual(["plain_desk:requested", "plain_desk:completed"]);
      // Sent blocking, without a push config.
      const send = plain.requests.find((r) => r.rpcMethod === "SendMessage");
      const configuration = (send?.params as { configuration?: Record<string, unknown> } | undefined)
        ?.configuration;
      expect(configuration).toBeDefined();
      expect(configuration).not.toHaveProperty("taskPushNotificationConfig");
      expect(plain.messages.map((m) => m.blocking)).toEqual([true]);
      // The step recorded a callback before the call (it cannot know the card): nothing points to
      // it, it is not pending, and it expires.
      const sending = (await rt.state.byStatus<RemoteCall>("remote-call", "sending")).items.filter(
        (c) => c.data.taskId === leafId,
      );
      expect(sending).toHaveLength(1);
      expect(sending[0]?.expiresAt).toBeDefined();
      expect((await pendingCalls()).filter((c) => c.data.taskId === leafId)).toEqual([]);
    } finally {
      desk = "venue_desk";
    }
  });

  it("a lost push: at the deadline the watchdog re-drives the leaf and the tool function asks the agent once", async () => {
    const { rootTaskId, leafId, remoteTaskId } = await handedOff();
    agent.dropPushes = true;
    await agent.finish(remoteTaskId); // done, but its push is lost on the way
    await drain();
    expect(await audit(leafId)).toEqual(["venue_desk:requested"]);
    const gets = () => agent.requests.filter((r) => r.rpcMethod === "GetTask").length;
    const before = gets();

    // Past the call's deadline and the watchdog's staleness: re-driven, and settled with one GetTask.
    skew += CALL_TIMEOUT_MS + STALE_MS + 1_000;
    const turns = events().filter((e) => e["detail-type"] === COMMANDS.turn).length;
    expect((await watchdog()).redriven).toBeGreaterThan(0);
    expect(events().filter((e) => e["detail-type"] === COMMANDS.turn).length).toBe(turns + 1);
    await drain();
    expect(gets()).toBe(before + 1);
    expect(await audit(leafId)).toEqual(["venue_desk:requested", "venue_desk:completed"]);
    const [result] = await toolResults(leafId);
    expect(result && "content" in result ? result.content : "").toContain("Casa do Rio");
    expect((await rt.tasks.view(rootTaskId))?.status).toBe("done");
    agent.dropPushes = false;
  });
});
