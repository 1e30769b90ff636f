import { randomUUID } from "node:crypto";
import type { InstrumentableClient } from "../../bench/aws-path-model.ts";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import type { EngineSettings } from "../../shared/engine/context.ts";
import type { ApiKeyEntry } from "../../shared/ports/key-store.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import type { IamGuard } from "../support/iam-guard.ts";
import { type AwsWorld, apiGuard, guarded, toolFunctionGuard } from "./aws-world.ts";

/**
 * The functions the engine stack deploys, in this process, on an AwsWorld: the tool function (behind
 * a Lambda Invoke peer, named as ARBOR_TOOL_FUNCTION names it), the API function, two engine-step
 * handlers, and the operator's runtime with `keys` added. `as(key)` calls the API as that key.
 *
 *   const fns = await startAwsFunctions(world, TOOL_FUNCTION, [root.entry]);
 *   const admin = fns.as(root.key);
 *   await admin.put("/v1/admin/team", TEAM);
 */
export interface Reply {
  status: number;
  json: Record<string, unknown> & { error?: { code: string; message: string } };
}

export interface AwsFunctions {
  api: ApiHandler;
  tools: ToolHandler;
  toolPeer: LambdaInvokePeer;
  steps: StepHandler[];
  /** What a handler of the engine's is made with (a watchdog's too). */
  stepDeps: Parameters<typeof createStepHandler>[0];
  rt: AwsRuntime;
  /** The tool function's grants, enforced on its calls: what it was refused, which grants it used. */
  toolGuard: IamGuard;
  call(event: APIGatewayProxyEventV2): Promise<Reply>;
  as(key: string): {
    get(path: string): Promise<Reply>;
    post(path: string, body: unknown): Promise<Reply>;
    put(path: string, body: unknown): Promise<Reply>;
  };
  close(): Promise<void>;
}

/** What a benchmark watches: every SDK client the functions get, and every tool function invocation. */
export interface FunctionHooks {
  client?(client: InstrumentableClient): void;
  tool?(event: unknown, run: () => Promise<unknown>): Promise<unknown>;
  /** The engine's settings over the deployed defaults (default: `turnStepMs: 0`, a step per turn). */
  engineSettings?: Partial<EngineSettings>;
}

export async function startAwsFunctions(
  world: AwsWorld,
  toolFunction: string,
  keys: readonly ApiKeyEntry[],
  hooks: FunctionHooks = {},
): Promise<AwsFunctions> {
  const config = () => world.config;
  const clients = world.clients;
  const { embeddings, s3vectors } = world.engineClients;
  const tools = createToolHandler({
    config,
    clients,
    tools: { clients: { embeddings, s3vectors, s3: clients.s3 } },
  });
  // The tool function's calls are held to its grants (the stack's ToolDataAccess policy).
  const guard = toolFunctionGuard(world);
  for (const client of [...Object.values(clients), embeddings, s3vectors]) guard.instrument(client);
  const guardedTool = (event: unknown) => guard.within(() => tools(event));
  const toolPeer = await LambdaInvokePeer.start({
    [toolFunction]: (event) =>
      hooks.tool ? hooks.tool(event, () => guardedTool(event)) : guardedTool(event),
  });
  const engineClients = { ...world.engineClients, lambda: toolPeer.client() };
  if (hooks.client)
    for (const client of new Set<unknown>([...Object.values(clients), ...Object.values(engineClients)]))
      if (client) hooks.client(client as InstrumentableClient);
  const api = guarded(
    apiGuard(world),
    createApiHandler({ config, clients, engine: { clients: engineClients } }),
  );
  const settings = hooks.engineSettings ?? { turnStepMs: 0 };
  const stepDeps = { config, clients, engine: { clients: engineClients, settings } };
  const steps = [createStepHandler(stepDeps), createStepHandler(stepDeps)];
  const rt = createAwsRuntime(world.config, {
    s3: clients.s3,
    dynamodb: world.dynamodb,
    eventbridge: clients.eventbridge,
  });
  for (const entry of keys) await new StateKeyStore(rt.state).add(entry);
  const call = async (event: APIGatewayProxyEventV2): Promise<Reply> => {
    const res = await api(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return { status: res.statusCode, json: body ? JSON.parse(body) : {} };
  };
  return {
    api,
    tools,
    toolPeer,
    steps,
    stepDeps,
    rt,
    toolGuard: guard,
    call,
    as: (key) => ({
      get: (path) => call(apiEvent("GET", path, { key })),
      post: (path, body) => call(apiEvent("POST", path, { key, body })),
      put: (path, body) => call(apiEvent("PUT", path, { key, body })),
    }),
    async close() {
      for (const s of steps) await s.close();
      await api.close();
      await tools.close();
      await toolPeer.close();
      await rt.close();
    },
  };
}
