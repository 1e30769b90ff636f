import { afterEach, describe, expect, it } from "vitest";
import { lambdaToolFunction } from "../../shared/adapters/aws/tool-function-invoke.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { toolFunctionContract } from "./tool-function.contract.ts";

/**
 * The tool function over Lambda's Invoke (adapters/aws/tool-function-invoke.ts), through the real
 * `@aws-sdk/client-lambda` client (one attempt, as the engine makes it) and the local Invoke peer.
 * The waits between throttled tries are shortened, yet long against the contract's timeouts.
 */
toolFunctionContract(
  "Lambda's Invoke (real Lambda client, local Invoke peer)",
  async (behind, functionName) => {
    const peer = await LambdaInvokePeer.start(behind.functions, {
      ...(behind.denied ? { denied: behind.denied } : {}),
      ...(behind.throttled ? { throttled: behind.throttled } : {}),
    });
    const client = lambdaToolFunction({
      client: peer.client(),
      functionName,
      ownsClient: true,
      throttleBackoffMs: [150, 150],
    });
    return {
      client,
      abandoned: () => peer.abandoned,
      connections: () => peer.connections(),
      close: async () => {
        client.close();
        await peer.close();
      },
    };
  },
);

describe("the tool function over Lambda's Invoke, with a client it does not own", () => {
  let peer: LambdaInvokePeer | undefined;
  afterEach(async () => {
    await peer?.close();
  });

  it("close() leaves the caller's client open", async () => {
    peer = await LambdaInvokePeer.start({ tools: () => ({ ok: true }) });
    const lambda = peer.client();
    const client = lambdaToolFunction({ client: lambda, functionName: "tools" });
    await client.invoke({ op: "ListTools" });
    client.close();
    expect(await client.invoke({ op: "ListTools" })).toEqual({ payload: { ok: true } });
    expect(await peer.connections()).toBe(1);
    lambda.destroy();
  });
});
