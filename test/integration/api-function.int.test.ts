import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { COMMANDS } from "../../shared/engine/context.ts";
import { type AwsClients, type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { createAwsApiEngine } from "../../shared/runtime/aws/aws-api-engine.ts";
import type { AwsEngineClients } from "../../shared/runtime/aws/aws-engine.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import type { EventBridgePeer } from "../peers/eventbridge-peer.ts";
import type { FakeS3Vectors } from "../peers/fake-s3vectors.ts";
import { arborCli, keyIn } from "../support/arbor-process.ts";
import { type AwsWorld, apiGuard, guarded, startAwsWorld } from "./aws-world.ts";

/**
 * The API function (functions/api.ts) as API Gateway's HTTP API invokes it: payload format 2.0
 * events, built as API Gateway builds them (the path decoded in `rawPath`, lower-case headers,
 * the API's domain in the request context), handed to the real handler, on the AWS adapters
 * against DynamoDB Local, s3rver and the EventBridge peer (plus fake Titan and S3 Vectors, which
 * the engine opens for team registration). No model is configured: the API function needs none.
 */
const BUS = "arbor-api-test";
const TTL = 30_000;
const suffix = randomBytes(4).toString("hex");

const admin = newApiKey({ id: "user_root", kind: "human", tenant: "acme", roles: ["admin"] });
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "acme", roles: [] });

describe("the API function behind API Gateway (payload format 2.0)", () => {
  let world: AwsWorld;
  let peer: EventBridgePeer;
  let s3vectors: FakeS3Vectors;
  let config: AwsConfig;
  let clients: Required<AwsClients>;
  let engineClients: AwsEngineClients;
  let rt: AwsRuntime;
  let handler: ApiHandler;
  let now = Date.UTC(2026, 10, 25, 12);

  const call = async (event: APIGatewayProxyEventV2) => {
    const res = await handler(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return {
      status: res.statusCode,
      headers: (res.headers ?? {}) as Record<string, string>,
      json: (body ? JSON.parse(body) : undefined) as Record<string, unknown> & {
        error?: { code: string; message: string };
      },
    };
  };

  beforeAll(async () => {
    // No model: the API function needs none.
    world = await startAwsWorld({
      name: "arbor-api",
      bus: BUS,
      env: {
        ARBOR_TENANT: "acme",
        ARBOR_PUBLIC_URL: PUBLIC_URL,
        ARBOR_A2A_BLOCKING_WAIT_MS: "300",
      },
    });
    ({ peer, s3vectors, config, clients, engineClients } = world);
    // The operator's side (`arbor keys add` with ARBOR_MODE=aws): keys written into the table.
    rt = createAwsRuntime(config, clients);
    const table = new StateKeyStore(rt.state);
    for (const k of [admin, partner]) await table.add(k.entry);

    handler = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => config,
        clients,
        engine: { clients: engineClients },
        now: () => now,
        keyCacheTtlMs: TTL,
      }),
    );
  });

  afterAll(async () => {
    await handler?.close();
    await rt?.close();
    await world?.close();
  });

  it("answers /healthz with 200 while the table and the bucket answer, without a key", async () => {
    const res = await call(apiEvent("GET", "/healthz"));
    expect(res).toMatchObject({ status: 200, json: { status: "ok" } });
  });

  it("refuses /v1 and /a2a without a key (401), and with a key the table does not have", async () => {
    const without = await call(
      apiEvent("GET", `/v1/tasks/${encodeURIComponent("cld:common.Tenant.acme/plan.Task.t")}`),
    );
    expect(without.status).toBe(401);
    expect(without.json.error?.code).toBe("UNAUTHENTICATED");
    expect(
      (await call(apiEvent("POST", "/v1/messages", { key: ada.key, body: { text: "hi" } }))).status,
    ).toBe(401);
    expect((await call(apiEvent("POST", "/a2a", { body: {} }))).status).toBe(401);
  });

  it("takes a message with a key from the table: 202, the message stored, its plan command on the bus", async () => {
    const res = await call(
      apiEvent("POST", "/v1/messages", {
        key: admin.key,
        body: { text: "Plan the team lunch", mode: "lazy" },
      }),
    );
    expect(res.status).toBe(202);
    const { messageUrn, rootTaskId } = res.json as { messageUrn: string; rootTaskId: string };
    expect(messageUrn).toMatch(/^cld:common\.Tenant\.acme\/common\.Conversation\.[^/]+\/common\.Message\./);
    expect(await rt.resources.get(messageUrn)).toMatchObject({
      role: "user",
      content: "Plan the team lunch",
    });
    const plans = peer
      .eventsOn(BUS)
      .filter((e) => e["detail-type"] === COMMANDS.plan && e.detail.messageUrn === messageUrn);
    expect(plans).toHaveLength(1);
    expect(plans[0]?.detail).toMatchObject({ mode: "lazy" });

    // The task's URN goes in the path encoded; API Gateway hands it over decoded, and the app still finds it.
    const task = await call(
      apiEvent("GET", `/v1/tasks/${encodeURIComponent(rootTaskId)}`, { key: admin.key }),
    );
    expect(task.status).toBe(200);
    expect(task.json).toMatchObject({ task: { taskId: rootTaskId }, output: null });
    const tree = await call(
      apiEvent("GET", `/v1/tasks/${encodeURIComponent(rootTaskId)}/tree?maxTasks=5`, { key: admin.key }),
    );
    expect(tree).toMatchObject({ status: 200, json: { maxTasks: 5 } });
  });

  it("takes a base64 body as API Gateway sends one", async () => {
    const res = await call(
      apiEvent("POST", "/v1/messages", {
        key: admin.key,
        base64: true,
        body: { text: "Again", mode: "lazy" },
      }),
    );
    expect(res.status).toBe(202);
  });

  it("serves the agent card with the configured public URL, whatever the Host header says", async () => {
    const res = await call(
      apiEvent("GET", "/.well-known/agent-card.json", {
        headers: { host: "evil.example", "x-forwarded-host": "evil.example" },
      }),
    );
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.json)).not.toContain("evil.example");
    expect(res.json).toMatchObject({
      supportedInterfaces: [
        { url: `${PUBLIC_URL}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: `${PUBLIC_URL}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "0.3" },
      ],
      url: `${PUBLIC_URL}/a2a`, // A2A 0.3 clients read this
    });
    // A conditional GET of the same card: 304, no body.
    const etag = res.headers.etag as string;
    expect(etag).toMatch(/^"/);
    const again = await call(
      apiEvent("GET", "/.well-known/agent-card.json", { headers: { "if-none-match": etag } }),
    );
    expect([again.status, again.json]).toEqual([304, undefined]);
  });

  it("answers a blocking A2A send with the task working within ARBOR_A2A_BLOCKING_WAIT_MS; GetTask polls it", async () => {
    const send = await call(
      apiEvent("POST", "/a2a", {
        key: partner.key,
        headers: { "a2a-version": "1.0" },
        body: {
          jsonrpc: "2.0",
          id: 1,
          method: "SendMessage",
          params: {
            message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "Plan the offsite" }] },
          },
        },
      }),
    );
    expect(send.status).toBe(200);
    const task = (send.json.result as { task: { id: string; status: { state: string } } }).task;
    expect(task.status.state).toBe("TASK_STATE_WORKING");
    const got = await call(
      apiEvent("POST", "/a2a", {
        key: partner.key,
        headers: { "a2a-version": "1.0" },
        body: { jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: task.id } },
      }),
    );
    expect(got.status).toBe(200);
    expect(got.json.result).toMatchObject({ id: task.id, status: { state: "TASK_STATE_WORKING" } });
  });

  it("answers an A2A 0.3 send with blocking false at once (no A2A-Version header): the task submitted, on disk", async () => {
    const send = await call(
      apiEvent("POST", "/a2a", {
        key: partner.key,
        body: {
          jsonrpc: "2.0",
          id: "ack",
          method: "message/send",
          params: {
            message: {
              kind: "message",
              messageId: randomUUID(),
              role: "user",
              parts: [{ kind: "text", text: "Plan the offsite" }],
            },
            configuration: { blocking: false, acceptedOutputModes: ["application/json"] },
          },
        },
      }),
    );
    expect(send.status).toBe(200);
    const task = send.json.result as { id: string; kind: string; status: { state: string } };
    expect(task).toMatchObject({ kind: "task", status: { state: "submitted" } });
    const got = await call(
      apiEvent("POST", "/a2a", {
        key: partner.key,
        body: { jsonrpc: "2.0", id: 2, method: "tasks/get", params: { id: task.id } },
      }),
    );
    expect(got.json.result).toMatchObject({ id: task.id, kind: "task" });
    expect(["submitted", "working"]).toContain(
      (got.json.result as { status: { state: string } }).status.state,
    );
  });

  it("admin routes: an admin makes a key for its tenant (shown once) that works at once; others get 403", async () => {
    const made = await call(
      apiEvent("POST", "/v1/admin/keys", { key: admin.key, body: { id: "user_bea", roles: ["ops"] } }),
    );
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({ id: "user_bea", tenant: "acme", roles: ["ops"], kind: "human" });
    const key = made.json.key as string;
    const listed = await call(apiEvent("GET", "/v1/admin/keys", { key: admin.key }));
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.json)).not.toContain(key);
    expect((listed.json.keys as { id: string }[]).map((k) => k.id).sort()).toEqual([
      "agent_partner",
      "user_bea",
      "user_root",
    ]);
    const asBea = await call(apiEvent("GET", "/v1/admin/keys", { key }));
    expect(asBea.status).toBe(403);
    const otherTenant = await call(
      apiEvent("POST", "/v1/admin/keys", { key: admin.key, body: { id: "user_eve", tenant: "beta" } }),
    );
    expect(otherTenant.status).toBe(403);
  });

  it("a key revoked in the table stops working once the cache's TTL has passed", async () => {
    const table = new StateKeyStore(rt.state);
    await table.add(ada.entry);
    now += TTL; // what the cache knew of ada's key (unknown) has expired
    const path = `/v1/tasks/${encodeURIComponent("cld:common.Tenant.acme/plan.Task.none")}`;
    const status = async () => (await call(apiEvent("GET", path, { key: ada.key }))).status;
    expect(await status()).toBe(403); // let in: the policy answers (no task of hers)
    await table.revoke("user_ada", "acme"); // another instance, or `arbor keys revoke`
    expect(await status()).toBe(403); // still cached in this instance
    now += TTL - 1;
    expect(await status()).toBe(403);
    now += 1;
    expect(await status()).toBe(401);
  });

  it("opens no tool and needs no model: a tool registry it cannot even read changes nothing", async () => {
    const toolless = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => ({ ...config, toolsFile: `/nonexistent-${suffix}/tools.json` }),
        clients,
        engine: { clients: engineClients },
      }),
    );
    try {
      const res = await toolless(
        apiEvent("POST", "/v1/messages", { key: admin.key, body: { text: "Hi", mode: "lazy" } }),
      );
      expect(res.statusCode).toBe(202);
    } finally {
      await toolless.close();
    }
  });

  it("takes the first admin key of a fresh stack, made by arbor keys with ARBOR_MODE=aws straight into the table", async () => {
    const cli = (args: string[]) =>
      arborCli(args, {
        ...process.env,
        ARBOR_MODE: "aws",
        ARBOR_TABLE_NAME: config.tableName,
        AWS_REGION: "us-east-1",
        ARBOR_DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
        AWS_ACCESS_KEY_ID: "test",
        AWS_SECRET_ACCESS_KEY: "test",
        ARBOR_TENANT: "gamma",
        NO_COLOR: "1",
      });
    const added = await cli(["keys", "add", "--id", "user_first", "--role", "admin"]);
    expect(added.code).toBe(0);
    expect(added.stdout).toContain(`to the state table ${config.tableName}`);
    const key = keyIn(added.stdout);
    const listed = await call(apiEvent("GET", "/v1/admin/keys", { key }));
    expect(listed.status).toBe(200);
    expect(listed.json.keys).toEqual([
      expect.objectContaining({ id: "user_first", tenant: "gamma", roles: ["admin"] }),
    ]);
    const all = await cli(["keys", "list"]);
    expect(all.stdout).toMatch(/user_first +human +tenant gamma, roles admin/);
    expect(all.stdout).toMatch(/user_root +human +tenant acme/);
    expect(all.stdout).not.toContain(key);
    const revoked = await cli(["keys", "revoke", "user_first", "--tenant", "gamma"]);
    expect(revoked.code).toBe(0);
    expect(await new StateKeyStore(rt.state).authenticate(`Bearer ${key}`)).toBeUndefined();
  });

  it("its engine registers (and indexes) assistants with Titan and S3 Vectors, and refuses to call a model or a tool", async () => {
    const engine = await createAwsApiEngine(rt, config, { clients: engineClients });
    try {
      const before = s3vectors.calls.filter((c) => c.operation === "PutVectors").length;
      const urns = await engine.registerAssistants("acme", [
        { name: "Writer", id: "writer", purpose: "Write short invitations for colleagues" },
      ]);
      expect(urns).toEqual(["cld:common.Tenant.acme/common.Assistant.writer"]);
      expect(await rt.resources.get(urns[0] as string)).toMatchObject({ meta: { name: "Writer" } });
      expect(s3vectors.calls.filter((c) => c.operation === "PutVectors").length).toBeGreaterThan(before);
      await expect(engine.deps.llm.complete({ messages: [] } as never)).rejects.toThrow(/calls no model/);
      expect(engine.deps.tools.list()).toEqual([]);
      expect(
        await engine.deps.tools.execute("calculator", {}, { taskId: "t", actor: "a", callId: "c" }),
      ).toMatchObject({
        isError: true,
      });
    } finally {
      await engine.close();
    }
  });

  it("keeps the per-key limits behind API Gateway's throttling: 429 with Retry-After past them", async () => {
    const limited = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => ({ ...config, rateLimits: { perKey: { perSecond: 1, burst: 2 } } }),
        clients,
        engine: { clients: engineClients },
        now: () => now,
      }),
    );
    try {
      const get = () => limited(apiEvent("GET", "/v1/admin/keys", { key: admin.key }));
      expect((await get()).statusCode).toBe(200);
      expect((await get()).statusCode).toBe(200);
      const third = await get();
      expect(third.statusCode).toBe(429);
      expect(third.headers).toMatchObject({ "retry-after": "1" });
    } finally {
      await limited.close();
    }
  });

  it("says 503 on /healthz when the table does not answer", async () => {
    const broken = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => ({ ...config, tableName: `arbor-missing-${suffix}` }),
        clients,
        engine: { clients: engineClients },
      }),
    );
    try {
      const res = await broken(apiEvent("GET", "/healthz"));
      expect(res.statusCode).toBe(503);
      expect(JSON.parse(res.body)).toMatchObject({ status: "unavailable", error: { code: "UNAVAILABLE" } });
    } finally {
      await broken.close();
    }
  });
});
