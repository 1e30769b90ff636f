import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { TitanEmbedder } from "../../shared/adapters/embeddings/titan-embedder.ts";
import { ConfigError, ThrottledError } from "../../shared/kernel/errors.ts";
import { FakeBedrockEmbeddings, fakeTitanVector } from "../peers/fake-bedrock-embeddings.ts";
import { embedderContract } from "./embedder.contract.ts";

// The real Bedrock runtime client (HTTP/2 by default) against the fake InvokeModel endpoint.
const fake = new FakeBedrockEmbeddings();
let endpoint: string;
const clients: BedrockRuntimeClient[] = [];
const newClient = (http1 = false) => {
  const c = new BedrockRuntimeClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 1,
    ...(http1 ? { requestHandler: new NodeHttpHandler() } : {}),
  });
  clients.push(c);
  return c;
};
const noSleep = async () => undefined;

beforeAll(async () => {
  endpoint = await fake.start();
});
afterAll(async () => {
  for (const c of clients) c.destroy();
  await fake.stop();
});

embedderContract("Bedrock Titan Text Embeddings v2 (fake endpoint, HTTP/2)", async () => ({
  embedder: new TitanEmbedder({ client: newClient(), dimension: 256, concurrency: 4, sleep: noSleep }),
  deterministic: true,
  batchSize: 1,
  cleanup: async () => undefined,
}));

embedderContract("Bedrock Titan Text Embeddings v2 (fake endpoint, HTTP/1.1)", async () => ({
  embedder: new TitanEmbedder({ client: newClient(true), dimension: 512, sleep: noSleep }),
  deterministic: true,
  batchSize: 1,
  cleanup: async () => undefined,
}));

describe("TitanEmbedder specifics", () => {
  beforeEach(() => {
    fake.delayMs = 0;
    fake.maxInFlight = 0;
  });

  it("sends {inputText, dimensions, normalize: true} to amazon.titan-embed-text-v2:0, one text per request", async () => {
    const embedder = new TitanEmbedder({ client: newClient(), dimension: 1024, sleep: noSleep });
    expect(embedder.id).toBe("bedrock:amazon.titan-embed-text-v2:0@1024");
    const from = fake.requests.length;
    const [v] = await embedder.embed(["Reconcile the ledger"]);
    expect(fake.requests.slice(from)).toEqual([
      {
        modelId: "amazon.titan-embed-text-v2:0",
        inputText: "Reconcile the ledger",
        dimensions: 1024,
        normalize: true,
      },
    ]);
    const expected = fakeTitanVector("Reconcile the ledger", 1024, true);
    expect(Array.from(v as Float32Array).slice(0, 4)).toEqual(expected.slice(0, 4).map(Math.fround));
  });

  it("keeps at most `concurrency` requests in flight", async () => {
    fake.delayMs = 20;
    const embedder = new TitanEmbedder({
      client: newClient(),
      dimension: 256,
      concurrency: 3,
      sleep: noSleep,
    });
    const out = await embedder.embed(Array.from({ length: 12 }, (_, i) => `text ${i}`));
    expect(out).toHaveLength(12);
    expect(fake.maxInFlight).toBe(3);
  });

  it("retries throttling with backoff, then succeeds", async () => {
    const waits: number[] = [];
    const embedder = new TitanEmbedder({
      client: newClient(),
      dimension: 256,
      concurrency: 1,
      maxAttempts: 4,
      baseDelayMs: 100,
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    fake.failNext(3);
    const [v] = await embedder.embed(["after three throttles"]);
    expect(v?.length).toBe(256);
    expect(waits).toHaveLength(3);
    for (const [i, w] of waits.entries()) expect(w).toBeLessThanOrEqual(100 * 2 ** i);
  });

  it("gives up with ThrottledError when throttling outlasts maxAttempts", async () => {
    const embedder = new TitanEmbedder({
      client: newClient(),
      dimension: 256,
      maxAttempts: 2,
      sleep: noSleep,
    });
    fake.failNext(2);
    await expect(embedder.embed(["still throttled"])).rejects.toBeInstanceOf(ThrottledError);
  });

  it("maps access errors to ConfigError without retrying", async () => {
    const embedder = new TitanEmbedder({
      client: newClient(),
      dimension: 256,
      maxAttempts: 5,
      sleep: noSleep,
    });
    const from = fake.requests.length;
    fake.failNext(1, { status: 403, type: "AccessDeniedException" });
    await expect(embedder.embed(["no access"])).rejects.toBeInstanceOf(ConfigError);
    expect(fake.requests.length).toBe(from);
  });

  it("refuses dimensions Titan v2 does not offer", () => {
    expect(() => new TitanEmbedder({ client: newClient(), dimension: 384 as 256 })).toThrow(ConfigError);
  });
});
