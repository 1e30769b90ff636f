import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { readBundle } from "../../shared/adapters/policy/policy-bundle-s3.ts";
import { PublishedPolicy } from "../../shared/adapters/policy/published-policy.ts";
import { defaultPolicy } from "../../shared/runtime/engine-wiring.ts";
import { buildOpaBundle } from "../fixtures/opa/bundle.ts";
import { arborCli } from "../support/arbor-process.ts";

/** `arbor policy publish` as an operator runs it (a real child process), against s3rver. */
const endpoint = inject("s3Endpoint");
const client = new S3Client({
  endpoint,
  region: "us-east-1",
  forcePathStyle: true,
  credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
});
const env: NodeJS.ProcessEnv = {
  ...process.env,
  NO_COLOR: "1",
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "S3RVER",
  AWS_SECRET_ACCESS_KEY: "S3RVER",
  ARBOR_S3_ENDPOINT: endpoint,
  ARBOR_POLICIES_BUCKET: "",
};

const arbor = (args: string[], extra: NodeJS.ProcessEnv = {}) => arborCli(args, { ...env, ...extra });

let dir: string;
let bundleFile: string;
let bundle: Buffer;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-publish-"));
  bundle = await buildOpaBundle();
  bundleFile = join(dir, "bundle.tar.gz");
  await writeFile(bundleFile, bundle);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function newBucket(): Promise<string> {
  const bucket = `arbor-policies-${randomBytes(6).toString("hex")}`;
  await client.send(new CreateBucketCommand({ Bucket: bucket }));
  return bucket;
}

describe("arbor policy publish", () => {
  it("checks the bundle, uploads it with its sha256, and says when it takes over", async () => {
    const bucket = await newBucket();
    const sha = createHash("sha256").update(bundle).digest("hex");
    const out = await arbor(["policy", "publish", bundleFile], { ARBOR_POLICIES_BUCKET: bucket });
    expect(out.stderr).not.toContain("arbor:");
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(
      `Checked ${bundleFile}: an OPA wasm policy with the entrypoint arbor/authz/allow, sha256 ${sha}`,
    );
    expect(out.stdout).toContain(
      `Published s3://${bucket}/bundle.tar.gz (its sha256 in x-amz-meta-sha256), then s3://${bucket}/bundle.tar.gz.sha256`,
    );
    expect(out.stdout).toMatch(/Takes over: functions that start from now decide with it .*within 5 minutes/);

    // The bundle carries its own hash; the .sha256 beside it says the same.
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: "bundle.tar.gz" }));
    expect(head.Metadata).toEqual({ sha256: sha });
    const shaObject = await client.send(
      new GetObjectCommand({ Bucket: bucket, Key: "bundle.tar.gz.sha256" }),
    );
    expect(await shaObject.Body?.transformToString()).toBe(`${sha}\n`);
    // What a function's cold start then decides with.
    const policy = await PublishedPolicy.open({
      client,
      bucket,
      fallback: defaultPolicy(),
      log: { warn: () => {}, info: () => {} },
    });
    expect(policy).toMatchObject({ bundled: true, engine: "opa", revision: sha.slice(0, 16) });

    // Under a prefix, with --bucket and --prefix.
    const other = await newBucket();
    const prefixed = await arbor(["policy", "publish", bundleFile, "--bucket", other, "--prefix", "v2/"]);
    expect(prefixed.code).toBe(0);
    expect(await readBundle(client, other, "v2/")).toMatchObject({
      kind: "bundle",
      sha256: sha,
      shaFrom: "metadata",
    });
  });

  it("uploads nothing when the bundle does not load, and says what is missing", async () => {
    const bucket = await newBucket();
    const junk = join(dir, "junk.tar.gz");
    await writeFile(junk, "not a bundle");
    const bad = await arbor(["policy", "publish", junk, "--bucket", bucket]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`arbor: ${junk} is neither a gzipped bundle nor a wasm module [CONFIG]`);
    expect(await readBundle(client, bucket)).toEqual({ kind: "none", key: "bundle.tar.gz" });

    const missing = await arbor(["policy", "publish", join(dir, "nowhere.tar.gz"), "--bucket", bucket]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/Cannot read .*nowhere\.tar\.gz.*Build it with: opa build -t wasm/);

    const noBucket = await arbor(["policy", "publish", bundleFile]);
    expect(noBucket.code).toBe(1);
    expect(noBucket.stderr).toContain("--bucket <PoliciesBucketName> or ARBOR_POLICIES_BUCKET");
    expect(await readBundle(client, bucket)).toEqual({ kind: "none", key: "bundle.tar.gz" });
  });
});
