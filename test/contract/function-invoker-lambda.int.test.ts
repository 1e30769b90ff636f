import { vi } from "vitest";
import { LambdaInvoker } from "../../shared/adapters/aws/lambda-invoker.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { type FunctionsBehind, functionInvokerContract } from "./function-invoker.contract.ts";

/**
 * LambdaInvoker (Lambda's Invoke) through the real `@aws-sdk/client-lambda` client and the local
 * Invoke peer: with the caller's clients (as the tests and the AWS tools make them), and with the
 * SDK's own, which read the region, credentials and endpoint from the environment (as local mode
 * and the deployed functions make them).
 */
const startPeer = ({ functions, denied, throttled }: FunctionsBehind) =>
  LambdaInvokePeer.start(functions, { ...(denied ? { denied } : {}), ...(throttled ? { throttled } : {}) });

functionInvokerContract(
  "Lambda's Invoke, the caller's clients (real Lambda client, local Invoke peer)",
  async (behind) => {
    const peer = await startPeer(behind);
    const invoker = new LambdaInvoker((region) => peer.client(region));
    return {
      invoker,
      defaultRegion: "us-east-1", // the peer's client(undefined)
      abandoned: () => peer.abandoned,
      connections: () => peer.connections(),
      close: async () => {
        invoker.close();
        await peer.close();
      },
    };
  },
);

functionInvokerContract(
  "Lambda's Invoke, the SDK's own clients (environment, local Invoke peer)",
  async (behind) => {
    const peer = await startPeer(behind);
    vi.stubEnv("AWS_REGION", "eu-north-1");
    vi.stubEnv("AWS_ACCESS_KEY_ID", "AKIDFROMENV");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "secret-from-env");
    vi.stubEnv("AWS_ENDPOINT_URL_LAMBDA", peer.endpoint);
    const invoker = new LambdaInvoker();
    return {
      invoker,
      defaultRegion: "eu-north-1",
      abandoned: () => peer.abandoned,
      connections: () => peer.connections(),
      close: async () => {
        invoker.close();
        vi.unstubAllEnvs();
        await peer.close();
      },
    };
  },
);
