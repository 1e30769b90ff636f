import { createHash, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { CreateBucketCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { describe, expect, inject, it } from "vitest";
import wabt from "wabt";
import { OpaPolicyEngine } from "../../shared/adapters/policy/opa-policy-engine.ts";
import { policyFor } from "../../shared/runtime/aws/aws-engine.ts";
import { loadConfig } from "../../shared/runtime/config.ts";

/** The OPA bundle read from the policies bucket with the real S3 client (s3rver). */
const client = new S3Client({
  endpoint: inject("s3Endpoint"),
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
});

describe("OPA bundle from the policies bucket", () => {
  it("reads the bundle and its sha256 under the prefix, and evaluates it", async () => {
    const module = (await wabt()).parseWat(
      "policy.wat",
      await readFile(join(import.meta.dirname, "../fixtures/opa/policy.wat"), "utf8"),
    );
    const wasm = Buffer.from(module.toBinary({}).buffer);
    module.destroy();
    const bucket = `arbor-policies-${randomBytes(6).toString("hex")}`;
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    const sha = createHash("sha256").update(wasm).digest("hex");
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: "v1/bundle.tar.gz", Body: wasm }));
    await client.send(
      new PutObjectCommand({ Bucket: bucket, Key: "v1/bundle.tar.gz.sha256", Body: `${sha}\n` }),
    );

    const opa = await OpaPolicyEngine.fromS3(client, bucket, { prefix: "v1/" });
    expect(opa.revision).toBe(sha.slice(0, 16));
    const system = await opa.decide({
      principal: { id: "system_engine", kind: "system" },
      action: "resource.read",
      resource: { id: "cld:common.Tenant.acme", tenant: "acme", type: "common.Tenant" },
    });
    expect(system.allow).toBe(true);
    await expect(OpaPolicyEngine.fromS3(client, bucket, { prefix: "v2/" })).rejects.toThrow(
      /Cannot read s3:\/\/arbor-policies-[0-9a-f]+\/v2\/bundle\.tar\.gz.*upload it with its sha256 .*or set ARBOR_POLICY_ENGINE=cedar/,
    );

    // What an AWS function decides with, from its configuration (OPA is the AWS default).
    const config = loadConfig({
      ARBOR_MODE: "aws",
      AWS_REGION: "us-east-1",
      ARBOR_RESOURCES_BUCKET: "r",
      ARBOR_TABLE_NAME: "t",
      ARBOR_EVENT_BUS_NAME: "e",
      ARBOR_POLICIES_BUCKET: bucket,
      ARBOR_POLICIES_PREFIX: "v1/",
    });
    if (config.mode !== "aws") throw new Error("expected aws");
    const fromConfig = await policyFor(config, client);
    expect(fromConfig).toMatchObject({ engine: "opa", revision: sha.slice(0, 16) });
  });
});
