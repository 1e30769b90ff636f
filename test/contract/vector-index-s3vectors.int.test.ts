import { randomBytes } from "node:crypto";
import { CreateIndexCommand, CreateVectorBucketCommand, S3VectorsClient } from "@aws-sdk/client-s3vectors";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3VectorsIndex } from "../../shared/adapters/vectors/s3-vectors-index.ts";
import { ConfigError, ThrottledError, ValidationError } from "../../shared/kernel/errors.ts";
import { FakeS3Vectors } from "../peers/fake-s3vectors.ts";
import { CONTRACT_SPACE, vectorIndexContract } from "./vector-index.contract.ts";

// The real S3 Vectors client against the fake S3 Vectors server (test/peers/fake-s3vectors.ts).
const fake = new FakeS3Vectors();
let client: S3VectorsClient;
const bucket = "arbor-test-vectors";

beforeAll(async () => {
  const endpoint = await fake.start();
  client = new S3VectorsClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 1,
  });
  await client.send(new CreateVectorBucketCommand({ vectorBucketName: bucket }));
});
afterAll(async () => {
  client.destroy();
  await fake.stop();
});

const newIndexName = () => `idx-${randomBytes(6).toString("hex")}`;

vectorIndexContract(
  "Amazon S3 Vectors (fake server, real SDK client)",
  async (space) => {
    const indexName = newIndexName();
    const open = (s: typeof space, createIfMissing = false) =>
      S3VectorsIndex.open({ client, vectorBucketName: bucket, indexName, space: s, createIfMissing });
    return { index: await open(space, true), reopen: (s) => open(s), cleanup: async () => undefined };
  },
  { backendBatchSize: 500 },
);

describe("S3VectorsIndex specifics", () => {
  const unit = (i: number) => {
    const v = new Float32Array(CONTRACT_SPACE.dimension);
    v[i % v.length] = 1;
    return v;
  };

  it("splits writes into PutVectors/DeleteVectors calls of at most 500 vectors", async () => {
    const index = await S3VectorsIndex.open({
      client,
      vectorBucketName: bucket,
      indexName: newIndexName(),
      space: CONTRACT_SPACE,
      createIfMissing: true,
    });
    const from = fake.calls.length;
    const keys = Array.from({ length: 1201 }, (_, i) => `cld:common.Tenant.t/plan.Task.k${i}`);
    await index.upsert(keys.map((key, i) => ({ key, vector: unit(i), type: "plan.Task" })));
    await index.delete(keys);
    const calls = fake.calls
      .slice(from)
      .filter((c) => c.operation === "PutVectors" || c.operation === "DeleteVectors");
    expect(calls.map((c) => `${c.operation}:${c.vectors}`)).toEqual([
      "PutVectors:500",
      "PutVectors:500",
      "PutVectors:201",
      "DeleteVectors:500",
      "DeleteVectors:500",
      "DeleteVectors:201",
    ]);
  });

  it("refuses an index that Arbor did not tag with its embedding space", async () => {
    const indexName = newIndexName();
    await client.send(
      new CreateIndexCommand({
        vectorBucketName: bucket,
        indexName,
        dataType: "float32",
        dimension: CONTRACT_SPACE.dimension,
        distanceMetric: "cosine",
      }),
    );
    await expect(
      S3VectorsIndex.open({ client, vectorBucketName: bucket, indexName, space: CONTRACT_SPACE }),
    ).rejects.toThrow(/no arbor:embedder-id tag/);
    await expect(
      S3VectorsIndex.open({
        client,
        vectorBucketName: bucket,
        indexName: newIndexName(),
        space: CONTRACT_SPACE,
      }),
    ).rejects.toBeInstanceOf(ConfigError);
  });

  it("supports whole-element URN prefixes only, and topK up to 100", async () => {
    const index = await S3VectorsIndex.open({
      client,
      vectorBucketName: bucket,
      indexName: newIndexName(),
      space: CONTRACT_SPACE,
      createIfMissing: true,
    });
    await expect(
      index.query({ vector: unit(0), topK: 5, keyPrefix: "cld:common.Tenant.al" }),
    ).rejects.toBeInstanceOf(ValidationError);
    await expect(index.query({ vector: unit(0), topK: 101 })).rejects.toBeInstanceOf(ValidationError);
    await expect(index.upsert([{ key: "not-a-urn", vector: unit(0), type: "x.Y" }])).rejects.toBeInstanceOf(
      ValidationError,
    );
  });

  it("maps throttling to ThrottledError", async () => {
    const index = await S3VectorsIndex.open({
      client,
      vectorBucketName: bucket,
      indexName: newIndexName(),
      space: CONTRACT_SPACE,
      createIfMissing: true,
    });
    fake.failNext("QueryVectors", 1);
    await expect(index.query({ vector: unit(0), topK: 1 })).rejects.toBeInstanceOf(ThrottledError);
    expect(await index.query({ vector: unit(0), topK: 1 })).toEqual([]);
  });
});
