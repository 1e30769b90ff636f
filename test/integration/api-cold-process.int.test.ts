import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { buildFunctionBundle, PROJECT_ROOT } from "../../infra/constructs/function-bundle.ts";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { apiEvent, PUBLIC_URL } from "../peers/api-gateway-events.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { type AwsWorld, guarded, startAwsWorld, toolFunctionGuard } from "./aws-world.ts";

/**
 * The API function as Lambda starts it after idle: its bundle as `cdk synth` builds it
 * (infra/constructs/function-bundle.ts: the handler and the chunks it loads when a call needs
 * them), imported by a fresh Node process whose first invocation is a new tenant's first request,
 * configured only by its environment, as the stack configures it; the tool function a fresh
 * instance of its own behind the Lambda Invoke peer (`ARBOR_LAMBDA_ENDPOINT`). The request is
 * accepted and planned (its command on the plan queue) and the process prints where its time went:
 * Node's start, the import, the first request. `npm run bench:aws` prints the same line.
 */
const TOOL_FUNCTION = "arbor-cold-tools";
const newcomer = newApiKey({ id: "user_new", kind: "human", tenant: "newco", roles: [] });
const run = promisify(execFile);

/** The endpoint a client of the world was made with, as a URL (its peer's). */
async function urlOf(client: { config: { endpoint?: () => Promise<unknown> } }): Promise<string> {
  const e = (await client.config.endpoint?.()) as { protocol: string; hostname: string; port?: number };
  return `${e.protocol}//${e.hostname}${e.port ? `:${e.port}` : ""}`;
}

describe("the API function's bundle, cold, in a process of its own", () => {
  let world: AwsWorld;
  let rt: AwsRuntime;
  let tools: ToolHandler;
  let toolPeer: LambdaInvokePeer;
  let dir: string;
  let dynamodb: DynamoDBClient;

  beforeAll(async () => {
    world = await startAwsWorld({
      name: "arbor-cold",
      bus: "arbor-cold",
      env: { ARBOR_TOOL_FUNCTION: TOOL_FUNCTION, ARBOR_PUBLIC_URL: PUBLIC_URL },
    });
    // The process signs every call with one key pair, s3rver's; DynamoDB Local keeps a table per
    // access key, so the table, the caller's key and the tool function are on that key's.
    dynamodb = new DynamoDBClient({
      region: world.config.region,
      endpoint: inject("dynamoEndpoint"),
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    await DynamoStateStore.ensureTable(dynamodb, world.config.tableName);
    const clients = { ...world.clients, dynamodb };
    const { embeddings, s3vectors } = world.engineClients;
    tools = createToolHandler({
      config: () => world.config,
      clients,
      tools: { clients: { embeddings, s3vectors, s3: world.clients.s3 } },
    });
    const guard = toolFunctionGuard(world);
    guard.instrument(dynamodb);
    toolPeer = await LambdaInvokePeer.start({ [TOOL_FUNCTION]: guarded(guard, tools) });
    rt = createAwsRuntime(world.config, clients);
    await new StateKeyStore(rt.state).add(newcomer.entry);
    dir = mkdtempSync(join(tmpdir(), "arbor-cold-"));
    buildFunctionBundle(join(PROJECT_ROOT, "functions/api.ts"), dir);
  }, 120_000);

  afterAll(async () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    await tools?.close();
    await toolPeer?.close();
    await rt?.close();
    dynamodb?.destroy();
    await world?.close();
  });

  it("takes a new tenant's first request, planned and accepted, from a fresh process", async () => {
    const { config } = world;
    const env = {
      PATH: process.env.PATH ?? "",
      AWS_REGION: config.region,
      // s3rver takes only its own demo key pair; the other peers take any.
      AWS_ACCESS_KEY_ID: "S3RVER",
      AWS_SECRET_ACCESS_KEY: "S3RVER",
      POWERTOOLS_LOG_LEVEL: "ERROR",
      ARBOR_MODE: "aws",
      ARBOR_RESOURCES_BUCKET: config.resourcesBucket,
      ARBOR_TABLE_NAME: config.tableName,
      ARBOR_EVENT_BUS_NAME: config.eventBusName,
      ARBOR_VECTOR_BUCKET: config.vectors?.bucket ?? "",
      ARBOR_VECTOR_INDEX: config.vectors?.index ?? "",
      ARBOR_COMMAND_QUEUES: JSON.stringify(world.commandQueues),
      ARBOR_POLICY_ENGINE: "cedar",
      ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
      ARBOR_PUBLIC_URL: PUBLIC_URL,
      ARBOR_S3_ENDPOINT: inject("s3Endpoint"),
      ARBOR_DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
      ARBOR_EVENTBRIDGE_ENDPOINT: world.peer.endpoint,
      ARBOR_SQS_ENDPOINT: world.sqs.endpoint,
      ARBOR_S3VECTORS_ENDPOINT: await urlOf(world.engineClients.s3vectors),
      ARBOR_BEDROCK_ENDPOINT: await urlOf(world.engineClients.embeddings),
      ARBOR_LAMBDA_ENDPOINT: toolPeer.endpoint,
    };
    const event = apiEvent("POST", "/v1/messages", { key: newcomer.key, body: { text: "Hello" } });
    const script = `
      const started = performance.now();
      const { handler } = await import(${JSON.stringify(pathToFileURL(join(dir, "index.mjs")).href)});
      const imported = performance.now();
      const res = await handler(${JSON.stringify(event)}, { awsRequestId: ${JSON.stringify(randomUUID())} });
      const answered = performance.now();
      process.stdout.write(JSON.stringify({
        nodeMs: started, importMs: imported - started, requestMs: answered - imported,
        status: res.statusCode, body: res.body,
      }) + "\\n");`;
    const spawned = performance.now();
    const { stdout, stderr } = await run(process.execPath, ["--input-type=module", "-e", script], {
      env,
      cwd: dir,
      timeout: 60_000,
    });
    const totalMs = performance.now() - spawned;
    const line = stdout.split("\n").find((l) => l.startsWith('{"nodeMs"')) ?? "{}";
    const out = JSON.parse(line) as {
      nodeMs: number;
      importMs: number;
      requestMs: number;
      status: number;
      body: string;
    };
    if (out.status !== 202) process.stderr.write(`the process said:\n${stdout}\n${stderr}\n`);
    expect([out.status, out.body]).toEqual([202, expect.stringContaining("rootTaskId")]);
    const { rootTaskId } = JSON.parse(out.body) as { rootTaskId: string };
    // Planned: its plan command waits on the plan step's queue.
    const planned = world.sqs.messages(world.commandQueues.plan).map((m) => m.body);
    expect(planned.some((b) => b.includes(rootTaskId.split("/plan.Task.")[0] as string))).toBe(true);
    process.stdout.write(
      `API function, a fresh process, a new tenant's first request: Node's start ${Math.round(out.nodeMs)} ms, ` +
        `import ${Math.round(out.importMs)} ms, the request ${Math.round(out.requestMs)} ms; ` +
        `${Math.round(totalMs)} ms from spawn to exit, here\n`,
    );
  }, 90_000);
});
