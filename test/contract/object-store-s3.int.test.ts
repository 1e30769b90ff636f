import { randomBytes } from "node:crypto";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { inject } from "vitest";
import { S3ObjectStore } from "../../shared/adapters/aws/s3-object-store.ts";
import { listAllKeys } from "../../shared/ports/object-store.ts";
import { objectStoreContract } from "./object-store.contract.ts";

// The real S3 client against s3rver (started by test/peers/global-setup.ts).
const client = new S3Client({
  endpoint: inject("s3Endpoint"),
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
});

objectStoreContract("S3 (s3rver)", async () => {
  const bucket = `arbor-test-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const store = new S3ObjectStore({ client, bucket });
  return {
    store,
    // s3rver buckets live in a temporary folder removed when the peer stops; empty it anyway to keep runs lean.
    cleanup: async () => {
      for (const k of await listAllKeys(store, "")) await store.delete(k);
    },
  };
});

objectStoreContract("S3 (s3rver) under a key prefix", async () => {
  const bucket = `arbor-test-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  await client.send(new CreateBucketCommand({ Bucket: `${bucket}-x` }));
  const store = new S3ObjectStore({ client, bucket, keyPrefix: "deployment-a/" });
  // Something outside the prefix must never show up in listings.
  await new S3ObjectStore({ client, bucket, keyPrefix: "deployment-b/" }).put("r/a.json", "other");
  return { store, cleanup: async () => undefined };
});
