import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { lambdaToolFunction } from "../../shared/adapters/aws/tool-function-invoke.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import { ToolFunctionPort } from "../../shared/tools/service/tool-function-port.ts";
import { toolResource, toolUrn } from "../../shared/tools/service/tool-registry.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import type { IamGuard } from "../support/iam-guard.ts";
import { type AwsWorld, apiGuard, guarded, startAwsWorld, toolFunctionGuard } from "./aws-world.ts";

/**
 * Tools as resources on AWS, offline: the tool function (functions/tool.ts, behind the Lambda
 * Invoke peer, the real SDK client) holds the configuration (ARBOR_TOOLS_FILE) and registers each
 * tenant's Tool resources in the resources bucket (s3rver), its registration record in the state
 * table (DynamoDB Local); the API function, which holds no configuration, answers
 * `GET /v1/tools?namespace=` through the tool function's ListTools, which reads the stored
 * resources. A new tool function instance with another configuration (a deploy) shows in the next
 * listing.
 */
const FUNCTION = "arbor-registry-tools";
const member = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const other = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });
const fresh = newApiKey({ id: "user_gil", kind: "human", tenant: "gamma", roles: [] });
const SECRET = "Bearer aws-s3cret-never-stored";

const FIRST = {
  tools: {
    sha256: { kind: "builtin", function: "sha256", namespace: "hashing" },
    md5: { kind: "builtin", function: "md5", namespace: "hashing" },
    word_count: { kind: "builtin", function: "word_count" },
    weather: {
      kind: "http",
      url: "https://api.example.com/weather",
      namespace: "web",
      description: "Weather for a city",
      headers: { authorization: SECRET },
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
};
/** The next deploy: md5 removed, weather changed, calculator added. */
const SECOND = {
  tools: {
    sha256: FIRST.tools.sha256,
    word_count: FIRST.tools.word_count,
    weather: { ...FIRST.tools.weather, description: "Weather for a city, by the hour" },
    calculator: { kind: "builtin", function: "calculator", namespace: "math" },
  },
};

describe("ListTools on AWS: the API function's route and the tool function's ListTools read the stored Tool resources", () => {
  let world: AwsWorld;
  let config: AwsConfig;
  let rt: AwsRuntime;
  let dir: string;
  let toolsFile: string;
  let tools: ToolHandler;
  let guard: IamGuard;
  let peer: LambdaInvokePeer;
  let api: ApiHandler;

  const get = async (path: string, key: string) => {
    const res = await api(apiEvent("GET", path, { key }), { awsRequestId: randomUUID() });
    return { status: res.statusCode, body: JSON.parse(res.body) as Record<string, unknown>, text: res.body };
  };
  const names = (body: Record<string, unknown>) => (body.tools as { name: string }[]).map((t) => t.name);
  const invoked = (op: string) =>
    peer.invocations.filter((i) => (i.payload as { op?: string } | null)?.op === op);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "arbor-tools-registry-aws-"));
    toolsFile = join(dir, "tools.json");
    writeFileSync(toolsFile, JSON.stringify(FIRST));
    world = await startAwsWorld({
      name: "arbor-tool-registry",
      bus: "arbor-tool-registry",
      model: planningModel({
        plan: { name: "Answer", purpose: "Answer" },
        evaluation: { reason: "fine" },
        leaf: () => ({ content: "done" }),
      }),
      env: {
        ARBOR_TOOL_FUNCTION: FUNCTION,
        ARBOR_TOOLS_FILE: toolsFile,
        ARBOR_STAGE: "registry-test",
        ARBOR_PUBLIC_URL: PUBLIC_URL,
      },
    });
    config = world.config;
    const { embeddings, s3vectors, s3 } = world.engineClients;
    // One handler per "instance": a deploy replaces it (below), the peer stays. Held to its grants.
    guard = toolFunctionGuard(world);
    tools = guarded(
      guard,
      createToolHandler({
        config: () => config,
        clients: world.clients,
        tools: { clients: { embeddings, s3vectors, s3 } },
      }),
    );
    peer = await LambdaInvokePeer.start({ [FUNCTION]: (event) => tools(event) });
    api = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => config,
        clients: world.clients,
        engine: { clients: { ...world.engineClients, lambda: peer.client() } },
      }),
    );
    rt = createAwsRuntime(config, world.clients);
    for (const k of [member, other, fresh]) await new StateKeyStore(rt.state).add(k.entry);
  }, 120_000);

  afterAll(async () => {
    // The tool function kept to its grants on every path here (infra/constructs/grants.ts).
    expect(guard?.denied).toEqual([]);
    await api?.close();
    await tools?.close();
    await peer?.close();
    await rt?.close();
    await world?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("GET /v1/tools?namespace= on the API function: the tenant's stored tools, registered by the tool function", async () => {
    const hashing = await get("/v1/tools?namespace=hashing", member.key);
    expect(hashing.status).toBe(200);
    expect(hashing.body).toMatchObject({
      tenant: "acme",
      namespace: "hashing",
      tools: [
        { name: "md5", namespace: "hashing", urn: toolUrn("acme", "md5") },
        { name: "sha256", namespace: "hashing", urn: toolUrn("acme", "sha256") },
      ],
    });
    expect(names((await get("/v1/tools", member.key)).body)).toEqual([
      "md5",
      "sha256",
      "weather",
      "word_count",
    ]);
    // In the bucket, without the secret header; the registration record in the table.
    const stored = await rt.resources.getAs("common.Tool", toolUrn("acme", "weather"));
    expect(stored).toMatchObject({ namespace: "web", binding: { kind: "http", config: {} } });
    expect(JSON.stringify(stored)).not.toContain("s3cret");
    expect((await get("/v1/tools", member.key)).text).not.toContain("s3cret");
    expect((await rt.state.get<{ tools: string[] }>("toolregistry#acme"))?.data.tools).toEqual([
      "md5",
      "sha256",
      "weather",
      "word_count",
    ]);
    // The listing is the tool function's, asked each time, for the caller's tenant.
    expect(invoked("ListTools").map((i) => i.payload)).toContainEqual({
      op: "ListTools",
      tenant: "acme",
      namespace: "hashing",
    });
  });

  it("answers from the bucket, and each key sees its own tenant's only", async () => {
    // The tool function's ListTools over the Lambda peer, as the engine's steps have it.
    const port = await ToolFunctionPort.open({
      toolFunction: lambdaToolFunction({ client: peer.client(), ownsClient: true, functionName: FUNCTION }),
      audit: rt.audit,
      clock: () => new Date(),
    });
    const [md5] = await port.listTools("beta", { namespace: "hashing" });
    await port.close();
    if (!md5) throw new Error("beta's tools are registered");
    expect(md5).toMatchObject({ name: "md5", namespace: "hashing", kind: "builtin" });
    await rt.resources.put(toolResource("beta", { ...md5, name: "beta_only" }));
    expect(names((await get("/v1/tools?namespace=hashing", other.key)).body)).toEqual([
      "beta_only",
      "md5",
      "sha256",
    ]);
    expect((await get("/v1/tools", member.key)).text).not.toContain("beta_only");
  });

  it("a bad namespace is a 400 that says what one is, before the tool function is asked; nothing is written", async () => {
    const before = invoked("ListTools").length;
    for (const ns of ["..%2Fhashing", "*", "x".repeat(10_000), "%C3%B1", "HASHING"]) {
      const res = await get(`/v1/tools?namespace=${ns}`, fresh.key);
      expect(res.status).toBe(400);
      expect(res.text).toContain("a namespace is 1-64 of a-z 0-9 _ -");
    }
    expect(invoked("ListTools").length).toBe(before);
    expect(await rt.resources.childUrns(tenantUrn("gamma"), "common.Tool")).toEqual([]);
  });

  it("a tool function deployed with another configuration: added, changed and removed tools show in the next listing", async () => {
    writeFileSync(toolsFile, JSON.stringify(SECOND));
    const old = tools;
    tools = guarded(
      guard,
      createToolHandler({
        config: () => config,
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
    await old.close();
    const listed = await get("/v1/tools", member.key);
    expect(names(listed.body)).toEqual(["calculator", "sha256", "weather", "word_count"]);
    expect(listed.body.tools).toContainEqual(
      expect.objectContaining({ name: "weather", description: "Weather for a city, by the hour" }),
    );
    expect(names((await get("/v1/tools?namespace=math", member.key)).body)).toEqual(["calculator"]);
    expect(await rt.resources.get(toolUrn("acme", "md5"))).toBeUndefined();
  });

  it("a tenant's first request through the API function registers its tools (RegisterTools), before any listing", async () => {
    const delta = newApiKey({ id: "user_dan", kind: "human", tenant: "delta", roles: [] });
    await new StateKeyStore(rt.state).add(delta.entry);
    const res = await api(apiEvent("POST", "/v1/messages", { key: delta.key, body: { text: "Hello" } }), {
      awsRequestId: randomUUID(),
    });
    expect(res.statusCode).toBe(202);
    // The registration runs beside the request (not in its path): it lands a moment later.
    const tools = () => rt.resources.childUrns(tenantUrn("delta"), "common.Tool");
    for (let i = 0; i < 200 && (await tools()).length < 4; i++) await sleep(25);
    expect(invoked("RegisterTools").map((i) => i.payload)).toContainEqual({
      op: "RegisterTools",
      tenant: "delta",
    });
    expect((await tools()).sort()).toEqual(
      ["calculator", "sha256", "weather", "word_count"].map((n) => toolUrn("delta", n)).sort(),
    );
  });
});
