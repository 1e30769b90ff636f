import { createHash, randomBytes } from "node:crypto";
import { CreateBucketCommand, DeleteObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { describe, expect, inject, it } from "vitest";
import { publishBundle } from "../../shared/adapters/policy/policy-bundle-s3.ts";
import { type PolicyLog, PublishedPolicy } from "../../shared/adapters/policy/published-policy.ts";
import type { PolicyInput } from "../../shared/ports/policy.ts";
import { policyFor } from "../../shared/runtime/aws/aws-engine.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { buildOpaBundle } from "../fixtures/opa/bundle.ts";

/**
 * A fresh deploy: the policies bucket has no bundle until someone publishes one. The functions
 * then decide with the built-in default policy and say so; a bad bundle is refused; a published
 * bundle takes over at the next re-check. The real S3 client against s3rver.
 */
const client = new S3Client({
  endpoint: inject("s3Endpoint"),
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
});

async function newBucket(): Promise<string> {
  const bucket = `arbor-policies-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

/** A log that keeps its lines. */
function recording(): PolicyLog & {
  lines: { level: string; message: string; details: Record<string, unknown> }[];
} {
  const lines: { level: string; message: string; details: Record<string, unknown> }[] = [];
  return {
    lines,
    warn: (message, details) => lines.push({ level: "WARN", message, details }),
    info: (message, details) => lines.push({ level: "INFO", message, details }),
  };
}

/** The Cedar default allows a person their own conversation; the test bundle allows only `system`. */
const ownConversation: PolicyInput = {
  principal: { id: "user_ada", kind: "human", tenant: "acme" },
  action: "resource.read",
  resource: {
    id: "cld:common.Tenant.acme/common.Conversation.c1",
    tenant: "acme",
    type: "common.Conversation",
    owner: "user_ada",
  },
};
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("the policies bucket on a fresh deploy", () => {
  it("without a bundle, decides with the built-in default policy and says so once, naming the bucket and the command", async () => {
    const bucket = await newBucket();
    const log = recording();
    let now = 0;
    const policy = await PublishedPolicy.open({
      client,
      bucket,
      fallback: defaultPolicy(),
      log,
      now: () => now,
      recheckMs: 300_000,
    });
    expect(policy.bundled).toBe(false);
    const decided = await policy.decide(ownConversation);
    expect(decided).toMatchObject({ allow: true, engine: "cedar", revision: defaultPolicy().revision });
    now += 600_000; // a re-check that still finds nothing says nothing more
    await policy.decide(ownConversation);
    expect(log.lines).toEqual([
      {
        level: "WARN",
        message: expect.stringMatching(
          new RegExp(
            `^No OPA bundle at s3://${bucket}/bundle\\.tar\\.gz \\(NoSuchKey\\): deciding with the built-in default policy \\(policies/arbor\\.cedar\\) until one is published with: arbor policy publish <bundle\\.tar\\.gz> --bucket ${bucket}$`,
          ),
        ),
        details: expect.objectContaining({
          bucket,
          key: "bundle.tar.gz",
          policy: "default",
          engine: "cedar",
        }),
      },
    ]);
  });

  it("refuses a bundle whose sha256 is not the one published with it, from the metadata or the .sha256 object", async () => {
    const bundle = await buildOpaBundle();
    const bucket = await newBucket();
    const open = () => PublishedPolicy.open({ client, bucket, fallback: defaultPolicy(), log: recording() });
    // Uploaded by hand with a wrong .sha256 beside it.
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: "bundle.tar.gz", Body: bundle }));
    await client.send(
      new PutObjectCommand({ Bucket: bucket, Key: "bundle.tar.gz.sha256", Body: "0".repeat(64) }),
    );
    await expect(open()).rejects.toThrow(/has sha256 [0-9a-f]{64}, not the 0{64} it was published with/);
    // Uploaded by hand without any sha256: not "no bundle" either.
    const bare = await newBucket();
    await client.send(new PutObjectCommand({ Bucket: bare, Key: "bundle.tar.gz", Body: bundle }));
    await expect(
      PublishedPolicy.open({ client, bucket: bare, fallback: defaultPolicy(), log: recording() }),
    ).rejects.toThrow(/bundle\.tar\.gz is there without its sha256 .*arbor policy publish/);
    // A bundle whose own metadata names another hash (changed after publishing).
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: "bundle.tar.gz",
        Body: bundle,
        Metadata: { sha256: "1".repeat(64) },
      }),
    );
    await expect(open()).rejects.toThrow(/not the 1{64} it was published with/);
    // Right hash, but not a policy.
    const junk = Buffer.from("not a bundle");
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: "bundle.tar.gz",
        Body: junk,
        Metadata: { sha256: sha(junk) },
      }),
    );
    await expect(open()).rejects.toThrow(/neither a gzipped bundle nor a wasm module/);
  });

  it("is an error, not the default policy, when the bucket cannot be read", async () => {
    const unreachable = new S3Client({
      endpoint: "http://127.0.0.1:9",
      region: "us-east-1",
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    await expect(
      PublishedPolicy.open({
        client: unreachable,
        bucket: "arbor-policies",
        fallback: defaultPolicy(),
        log: recording(),
      }),
    ).rejects.toThrow(/Cannot read s3:\/\/arbor-policies\/bundle\.tar\.gz/);
    // A 403 (here s3rver refusing an unknown access key) is not "no bundle": S3 answers a missing
    // key with 403 to whoever may not list the bucket, so it may hide a bundle that is there.
    const stranger = new S3Client({
      endpoint: inject("s3Endpoint"),
      region: "us-east-1",
      forcePathStyle: true,
      credentials: { accessKeyId: "STRANGER", secretAccessKey: "not-s3rver" },
    });
    await expect(
      PublishedPolicy.open({
        client: stranger,
        bucket: await newBucket(),
        fallback: defaultPolicy(),
        log: recording(),
      }),
    ).rejects.toThrow(
      /Access denied reading s3:\/\/arbor-policies-[0-9a-f]+\/bundle\.tar\.gz: the function's role needs s3:GetObject .* s3:ListBucket/,
    );
    // A bucket that does not exist is not an empty one either.
    await expect(
      PublishedPolicy.open({
        client,
        bucket: "arbor-no-such-bucket",
        fallback: defaultPolicy(),
        log: recording(),
      }),
    ).rejects.toThrow(/NoSuchBucket/);
  });

  it("lets a published bundle decide from the first re-check after it is published", async () => {
    const bundle = await buildOpaBundle();
    const bucket = await newBucket();
    const log = recording();
    let now = 1_000;
    const config = loadConfig({
      ARBOR_MODE: "aws",
      AWS_REGION: "us-east-1",
      ARBOR_RESOURCES_BUCKET: "r",
      ARBOR_TABLE_NAME: "t",
      ARBOR_EVENT_BUS_NAME: "e",
      ARBOR_POLICIES_BUCKET: bucket,
    });
    if (config.mode !== "aws") throw new Error("expected aws");
    const policy = await policyFor(config, client, { now: () => now, log });
    expect(await policy.decide(ownConversation)).toMatchObject({ allow: true, engine: "cedar" });

    const published = await publishBundle(client, bucket, bundle);
    expect(published.sha256).toBe(sha(bundle));
    // Before the re-check point the instance keeps the policy it has.
    now += 299_999;
    expect(await policy.decide(ownConversation)).toMatchObject({ allow: true, engine: "cedar" });
    // From the re-check point on, the bundle decides (it allows only the engine itself).
    now += 1;
    expect(await policy.decide(ownConversation)).toMatchObject({
      allow: false,
      engine: "opa",
      revision: sha(bundle).slice(0, 16),
    });
    expect(policy).toMatchObject({ engine: "opa", revision: sha(bundle).slice(0, 16) });
    expect(log.lines.map((l) => [l.level, l.message])).toEqual([
      ["WARN", expect.stringContaining("No OPA bundle")],
      ["INFO", `A new OPA bundle at s3://${bucket}/bundle.tar.gz takes over`],
    ]);

    // Later checks that find the same upload load nothing again.
    now += 600_000;
    expect(await policy.decide(ownConversation)).toMatchObject({ engine: "opa" });
    expect(log.lines).toHaveLength(2);

    // A cold start after publishing decides with it at once, and so does one reading the pair by hand.
    const cold = await PublishedPolicy.open({ client, bucket, fallback: defaultPolicy(), log: recording() });
    expect(cold).toMatchObject({ bundled: true, engine: "opa" });

    // A bad bundle replacing it makes decisions fail; it never falls back to the default.
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: "bundle.tar.gz",
        Body: bundle,
        Metadata: { sha256: "2".repeat(64) },
      }),
    );
    now += 300_000;
    await expect(policy.decide(ownConversation)).rejects.toThrow(/not the 2{64} it was published with/);
    await expect(policy.decide(ownConversation)).rejects.toThrow(/not the 2{64}/);

    // The bundle removed: the default policy decides again, and the logs say so again.
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: "bundle.tar.gz" }));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: "bundle.tar.gz.sha256" }));
    expect(await policy.decide(ownConversation)).toMatchObject({ allow: true, engine: "cedar" });
    expect(log.lines.map((l) => l.level)).toEqual(["WARN", "INFO", "WARN"]);
  });
});
