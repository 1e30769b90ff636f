import type { LambdaClient } from "@aws-sdk/client-lambda";
import { ObjectArtifactStore } from "../../adapters/shared/object-artifact-store.ts";
import { graphStoreOf } from "../../graph/graph-of.ts";
import { createGuardedFetch } from "../../outbound/guard.ts";
import { outboundPolicy } from "../../outbound/policy.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import type { PolicyEngine } from "../../ports/policy.ts";
import { loadToolsConfig } from "../../tools/service/config.ts";
import { ToolService } from "../../tools/service/tool-service.ts";
import type { AwsConfig } from "../config.ts";
import { lambdaFunctions } from "../engine-wiring.ts";
import type { AwsRuntime } from "./aws.ts";
import { openAwsEmbeddings } from "./aws-embeddings.ts";
import { type AwsEngineClients, policyFor } from "./aws-engine.ts";

/**
 * The tool service of the tool function (functions/tool.ts) on AWS: the registry bundled with it
 * (ARBOR_TOOLS_FILE; the built-ins without one), MCP servers connected and A2A cards fetched here,
 * the policy of the configuration (OPA from the policies bucket, or Cedar), the outbound guard of
 * ARBOR_OUTBOUND_*, the audit log and resources of the runtime, and the embeddings the search
 * built-ins read. The same ToolService that runs in process locally, without a public URL: an A2A
 * agent that pushes gets the callback the turn step made (ToolContext.callback, ToolFunctionPort).
 */
export interface AwsToolsOptions {
  /** Bedrock for the embedder, S3 Vectors, S3 for the OPA bundle; `lambda` for the registry's lambda tools. */
  clients?: Omit<AwsEngineClients, "lambda"> & { lambda?: (region: string | undefined) => LambdaClient };
  embedder?: Embedder;
  policy?: PolicyEngine;
  /** Replaces the outbound guard (tests only). */
  fetch?: typeof fetch;
  clock?: () => Date;
}

export async function openAwsToolService(
  rt: AwsRuntime,
  config: AwsConfig,
  options: AwsToolsOptions = {},
): Promise<ToolService> {
  const clients = options.clients ?? {};
  const { embedder, index } = await openAwsEmbeddings(config, clients, options.embedder);
  return ToolService.open(
    loadToolsConfig(config.toolsFile),
    {
      resources: rt.resources,
      state: rt.state, // each tenant's tool registration record (tools/service/tool-registry.ts)
      audit: rt.audit,
      untilDurable: () => rt.untilDurable(),
      policy: options.policy ?? (await policyFor(config, clients.s3)),
      clock: options.clock ?? (() => new Date()),
      embedder,
      index,
      graph: graphStoreOf(rt.state),
      artifacts: new ObjectArtifactStore(rt.objects),
      fetch: options.fetch ?? createGuardedFetch(outboundPolicy(config.outbound)),
      functions: lambdaFunctions(clients.lambda),
    },
    config.toolsFile,
  );
}
