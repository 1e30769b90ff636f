import type { Engine } from "../../engine/engine.ts";
import { ConfigError } from "../../kernel/errors.ts";
import type { Llm, LlmRequest, LlmResponse, LlmStreamEvent } from "../../ports/llm.ts";
import type { CallHistory, ToolDescriptor, ToolPort, ToolResult } from "../../ports/tools.ts";
import type { AwsConfig } from "../config.ts";
import { engineOn } from "../engine-wiring.ts";
import type { AwsRuntime } from "./aws.ts";
import { openAwsEmbeddings } from "./aws-embeddings.ts";
import { type AwsEngineOptions, openToolFunctionInBackground, policyFor } from "./aws-engine.ts";

/**
 * The engine as the API function builds it: the entry points a channel calls (submit, result,
 * respond, cancel, registerAssistants, authorize...) on the AWS runtime, and nothing that runs
 * work. The steps run in their own functions, on the events the entry points publish, so this
 * engine has no model (a call to it is a bug, and says so), no tools (no MCP or A2A connection is
 * opened, no tool's grant or secret is needed), and never subscribes its steps. It does have
 * Titan embeddings and the S3 Vectors index: registering a team indexes its assistants.
 */
export async function createAwsApiEngine(
  rt: AwsRuntime,
  config: AwsConfig,
  options: AwsEngineOptions = {},
): Promise<Engine> {
  const clients = options.clients ?? {};
  const { embedder, index } = await openAwsEmbeddings(config, clients, options.embedder);
  const policy = options.policy ?? (await policyFor(config, clients.s3));
  // The tools' names (a team file names the tools its assistants may use, and is checked against
  // them) come from the tool function's ListTools: this function holds no registry and no secret.
  // Asked in the background: the cold start waits on the tool function only when a deployed team
  // file is to be checked against them now.
  const tools =
    options.tools ??
    (config.toolFunction
      ? listingOnly(openToolFunctionInBackground(rt, config, config.toolFunction, clients.lambda, options))
      : NO_TOOLS);
  if (config.teamFile) await tools.ready?.();
  return engineOn(
    rt,
    { llm: options.llm ?? NO_MODEL, embedder, index, tools },
    {
      ...options,
      ...(config.teamFile ? { teamFile: config.teamFile } : {}),
      policy,
      warnToolGaps: false,
      // A2A answers link a large file by a signed URL of its bytes, valid for 15 minutes.
      artifactLink: (info) =>
        rt.objects.signedGetUrl(`${info.urn}.bytes`, {
          expiresInSeconds: 900,
          filename: info.name,
          contentType: info.contentType,
        }),
    },
  );
}

const notHere = (what: string) =>
  new ConfigError(
    `The API function ${what}: it only takes requests, and the engine step functions do the work. ` +
      "A call here is a wiring mistake: run the step on its own function (functions/engine-step.ts)",
  );

/** The model of a function that must never call one. */
export const NO_MODEL: Llm = {
  id: "none (API function)",
  complete(_request: LlmRequest): Promise<LlmResponse> {
    return Promise.reject(notHere("calls no model"));
  },
  stream(_request: LlmRequest): AsyncIterable<LlmStreamEvent> {
    return {
      [Symbol.asyncIterator]: () => ({
        next: () => Promise.reject(notHere("calls no model")),
      }),
    };
  },
};

/**
 * The tools of `port` as a function that runs none sees them: listed, described, never run; a call
 * a remote agent was handed is settled through it (in the tool function) when its push comes.
 */
export function listingOnly(port: ToolPort): ToolPort {
  return {
    list: () => port.list(),
    describe: (names) => port.describe(names),
    check: (name, args) => port.check(name, args),
    execute: (name, args, context) => NO_TOOLS.execute(name, args, context),
    history: (taskId, callId) => port.history(taskId, callId),
    // ListTools of a tenant, and its registration, are the tool function's (it holds the configuration).
    ...(port.listTools ? { listTools: port.listTools.bind(port) } : {}),
    // A tenant's registration runs beside its first request, not in its path: the tool function
    // registers the tenant again at its first ListTools anyway (engine/team.ts).
    ...(port.register
      ? {
          register: (tenant: string) => {
            port.register?.(tenant).catch(() => {});
            return Promise.resolve(REGISTERING);
          },
        }
      : {}),
    ...(port.ready ? { ready: port.ready.bind(port) } : {}),
    // A remote agent's push (POST /v1/a2a-callbacks/:id) is settled in the tool function.
    ...(port.settle ? { settle: port.settle.bind(port) } : {}),
    close: () => port.close?.() ?? Promise.resolve(),
  };
}

/** What `register` answers while the registration goes on beside the request. */
const REGISTERING = { written: [], deleted: [], registryHash: "", urns: [] };

/** The tools of a function that runs none: it lists none and refuses every call (as a result). */
export const NO_TOOLS: ToolPort = {
  list: (): ToolDescriptor[] => [],
  describe: (): ToolDescriptor[] => [],
  check: (): string[] => [],
  execute: (name: string): Promise<ToolResult> =>
    Promise.resolve({ content: `The tool ${name} does not run in the API function`, isError: true }),
  history: (_taskId: string, _callId: string): Promise<CallHistory> =>
    Promise.resolve({ attempts: 0, idempotencyKey: "" }),
};
