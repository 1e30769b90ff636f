import { randomBytes } from "node:crypto";
import {
  CreateBucketCommand,
  DeleteObjectsCommand,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { inject } from "vitest";
import { S3ObjectStore } from "../../shared/adapters/aws/s3-object-store.ts";
import { artifactStoreContract } from "./artifact-store.contract.ts";
import { objectStoreContract } from "./object-store.contract.ts";

// The real S3 client against s3rver (started by test/peers/global-setup.ts).
const client = new S3Client({
  endpoint: inject("s3Endpoint"),
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
});

/** A fresh bucket on s3rver, emptied after. */
async function s3Store() {
  const bucket = `arbor-test-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  const store = new S3ObjectStore({ client, bucket });
  return {
    store,
    // s3rver buckets live in a temporary folder removed when the peer stops; empty it anyway to keep
    // runs lean: one DeleteObjects request per listed page (up to 1,000 keys), not one per key.
    cleanup: async () => {
      let token: string | undefined;
      do {
        const page = await client.send(
          new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }),
        );
        const objects = (page.Contents ?? []).map(({ Key }) => ({ Key }));
        if (objects.length > 0)
          await client.send(
            new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: objects, Quiet: true } }),
          );
        token = page.NextContinuationToken;
      } while (token !== undefined);
    },
  };
}

objectStoreContract("S3 (s3rver)", s3Store);
artifactStoreContract("S3 (s3rver)", s3Store);

objectStoreContract("S3 (s3rver) under a key prefix", async () => {
  const bucket = `arbor-test-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  await client.send(new CreateBucketCommand({ Bucket: `${bucket}-x` }));
  const store = new S3ObjectStore({ client, bucket, keyPrefix: "deployment-a/" });
  // Something outside the prefix must never show up in listings.
  await new S3ObjectStore({ client, bucket, keyPrefix: "deployment-b/" }).put("r/a.json", "other");
  return { store, cleanup: async () => undefined };
});
