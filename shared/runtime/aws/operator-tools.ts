import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { LambdaClient } from "@aws-sdk/client-lambda";
import { S3Client } from "@aws-sdk/client-s3";
import { SQSClient } from "@aws-sdk/client-sqs";
import { DeadLetterQueue } from "../../adapters/aws/dead-letters.ts";
import { DEFAULT_ENTRYPOINT, OpaPolicyEngine } from "../../adapters/policy/opa-policy-engine.ts";
import { publishBundle, readBundle } from "../../adapters/policy/policy-bundle-s3.ts";
import { ROUTES } from "../../engine/routes.ts";
import type { OperatorSettings } from "../config.ts";

export type { DeadLetter, DeadLetterQueue } from "../../adapters/aws/dead-letters.ts";

/**
 * What the operator's commands (`arbor dlq`, `arbor keys --target aws`, `arbor policy publish`)
 * reach a deployed stack with, built here so that the CLI chooses no adapter and builds no client.
 */

/** Clients a test (or a caller with its own credentials) gives instead of the default ones. */
export interface DlqClients {
  sqs?: SQSClient;
  lambda?: LambdaClient;
  events?: EventBridgeClient;
}

/** The dead-letter queue of a deployed stack, with the engine's routes to send its messages back to. */
export function deadLetterQueue(
  settings: OperatorSettings,
  target: { queueUrl: string; eventBusName: string | undefined },
  clients: DlqClients = {},
): DeadLetterQueue {
  const at = (endpoint: string | undefined) => ({
    ...(settings.region ? { region: settings.region } : {}),
    ...(endpoint ? { endpoint } : {}),
  });
  return new DeadLetterQueue({
    sqs: clients.sqs ?? new SQSClient(at(settings.endpoints.sqs)),
    lambda: clients.lambda ?? new LambdaClient(at(settings.endpoints.lambda)),
    events: clients.events ?? new EventBridgeClient(at(settings.endpoints.eventbridge)),
    ...target,
    routes: ROUTES.map((r) => r.name),
  });
}

/** The S3 client `arbor policy publish` uses (a test's, or one for the operator's settings). */
export type PolicyBucketClient = S3Client;

/** The entrypoint a policy bundle must have (`opa build -e ...`). */
export const POLICY_ENTRYPOINT = DEFAULT_ENTRYPOINT;

/** Loads a bundle with the same loader and checks as a function's cold start; throws when it would not load there. */
export async function checkPolicyBundle(
  bytes: Uint8Array,
  sha256: string,
  source: string,
): Promise<{ revision: string }> {
  const policy = await OpaPolicyEngine.load(bytes, sha256, { source });
  return { revision: policy.revision };
}

/** The policies bucket of a deployed stack: publish a bundle, read back what is published. */
export function policyBucket(settings: OperatorSettings, client?: PolicyBucketClient) {
  const s3 =
    client ??
    new S3Client({
      ...(settings.region ? { region: settings.region } : {}),
      ...(settings.endpoints.s3 ? { endpoint: settings.endpoints.s3, forcePathStyle: true } : {}),
    });
  return {
    publish: (bucket: string, bytes: Uint8Array, prefix?: string) => publishBundle(s3, bucket, bytes, prefix),
    read: (bucket: string, prefix?: string) => readBundle(s3, bucket, prefix),
  };
}
