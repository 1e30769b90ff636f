import { createHash } from "node:crypto";
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { ConfigError, UnavailableError } from "../../kernel/errors.ts";

/**
 * The OPA bundle in the policies bucket: `<prefix>bundle.tar.gz` and `<prefix>bundle.tar.gz.sha256`.
 *
 * Two objects cannot be written at once, and a reader that reads them one after the other can
 * see a new bundle with the old hash (or the reverse) whatever order they are written in. So the
 * hash the bundle was published with also travels WITH the bundle, as its `x-amz-meta-sha256`:
 * one PUT, atomic. A reader checks the bundle against its own metadata when it is there, and
 * against the `.sha256` object only when it is not (a bundle uploaded by hand with `aws s3 cp`).
 * `arbor policy publish` writes the bundle (with the metadata) first, which is the moment it
 * takes over, then the `.sha256` object, for people and tools that read the pair.
 */
export const BUNDLE_FILE = "bundle.tar.gz";
/** The metadata key (`x-amz-meta-sha256`) holding the bundle's hex sha256. */
export const SHA256_METADATA = "sha256";

export interface BundleKeys {
  bundle: string;
  sha256: string;
}

export const bundleKeys = (prefix = ""): BundleKeys => ({
  bundle: `${prefix}${BUNDLE_FILE}`,
  sha256: `${prefix}${BUNDLE_FILE}.sha256`,
});

/** The command that publishes a bundle to `bucket`: what the logs and errors tell people to run. */
export const publishCommand = (bucket: string, prefix = ""): string =>
  `arbor policy publish <bundle.tar.gz> --bucket ${bucket}${prefix ? ` --prefix ${prefix}` : ""}`;

export type PublishedBundle =
  | { kind: "none"; key: string }
  | {
      kind: "bundle";
      key: string;
      bytes: Uint8Array;
      /** The hex sha256 it was published with (metadata, else the `.sha256` object). */
      sha256: string;
      /** Where that hash came from. */
      shaFrom: "metadata" | "object";
      /** Which upload this is: ETag, metadata hash and time (HeadObject tells the same). */
      version: string;
    };

const sha256Of = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
const hashIn = (text: string) => text.trim().split(/\s/)[0]?.toLowerCase() ?? "";

/** The bundle as published, or `none` when the bucket has no bundle (NoSuchKey). */
export async function readBundle(client: S3Client, bucket: string, prefix = ""): Promise<PublishedBundle> {
  const keys = bundleKeys(prefix);
  const got = await getObject(client, bucket, keys.bundle);
  if (!got) return { kind: "none", key: keys.bundle };
  const version = got.version;
  const fromMetadata = got.metadata[SHA256_METADATA];
  if (fromMetadata) {
    return {
      kind: "bundle",
      key: keys.bundle,
      bytes: got.bytes,
      sha256: hashIn(fromMetadata),
      shaFrom: "metadata",
      version,
    };
  }
  const sha = await getObject(client, bucket, keys.sha256);
  if (!sha) {
    throw new ConfigError(
      `s3://${bucket}/${keys.bundle} is there without its sha256 (no x-amz-meta-sha256, no ${keys.sha256}): ` +
        `publish it with ${publishCommand(bucket, prefix)}`,
    );
  }
  return {
    kind: "bundle",
    key: keys.bundle,
    bytes: got.bytes,
    sha256: hashIn(Buffer.from(sha.bytes).toString("utf8")),
    shaFrom: "object",
    version,
  };
}

/**
 * Which upload of the bundle is there (HeadObject), or undefined when there is none: the cheap
 * "has it changed?". The ETag alone is the content's MD5, blind to a new hash in the metadata.
 */
export async function bundleVersion(
  client: S3Client,
  bucket: string,
  prefix = "",
): Promise<string | undefined> {
  const key = bundleKeys(prefix).bundle;
  try {
    return versionOf(await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
  } catch (cause) {
    // HeadObject has no body, so a missing key is a bare 404 ("NotFound"), not NoSuchKey.
    if (isMissing(cause)) return undefined;
    throw readError(bucket, key, cause);
  }
}

/**
 * Uploads a bundle: first `bundle.tar.gz` with its sha256 in its metadata (from this PUT on, a
 * function that reads it gets the new bundle with its own hash), then `bundle.tar.gz.sha256`.
 */
export async function publishBundle(
  client: S3Client,
  bucket: string,
  bytes: Uint8Array,
  prefix = "",
): Promise<{ sha256: string; keys: BundleKeys; etag: string | undefined }> {
  const keys = bundleKeys(prefix);
  const sha256 = sha256Of(bytes);
  const put = await client.send(
    new PutObjectCommand({
      Bucket: bucket,
      Key: keys.bundle,
      Body: bytes,
      ContentType: "application/gzip",
      Metadata: { [SHA256_METADATA]: sha256 },
    }),
  );
  await client.send(
    new PutObjectCommand({
      Bucket: bucket,
      Key: keys.sha256,
      Body: `${sha256}\n`,
      ContentType: "text/plain",
    }),
  );
  return { sha256, keys, etag: put.ETag };
}

interface Got {
  bytes: Uint8Array;
  metadata: Record<string, string>;
  version: string;
}

const versionOf = (out: {
  ETag?: string | undefined;
  LastModified?: Date | undefined;
  Metadata?: Record<string, string> | undefined;
}) =>
  [out.ETag ?? "", out.Metadata?.[SHA256_METADATA] ?? "", out.LastModified?.toISOString() ?? ""].join("|");

/** The object, or undefined on NoSuchKey; access denied and network failures are errors. */
async function getObject(client: S3Client, bucket: string, key: string): Promise<Got | undefined> {
  try {
    const out = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    const body = out.Body as { transformToByteArray(): Promise<Uint8Array> } | undefined;
    return {
      bytes: body ? await body.transformToByteArray() : new Uint8Array(),
      metadata: out.Metadata ?? {},
      version: versionOf(out),
    };
  } catch (cause) {
    if (isMissing(cause)) return undefined;
    throw readError(bucket, key, cause);
  }
}

interface S3Failure {
  name?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
}

/**
 * Only S3's own "no such key" answer means "no bundle". A 403 is not one: S3 answers a missing
 * key with 403 to a caller without s3:ListBucket, so it may hide a bundle that is there.
 */
function isMissing(cause: unknown): boolean {
  const e = cause as S3Failure;
  return e.name === "NoSuchKey" || (e.name === "NotFound" && e.$metadata?.httpStatusCode === 404);
}

function readError(bucket: string, key: string, cause: unknown): Error {
  const e = cause as S3Failure;
  const where = `s3://${bucket}/${key}`;
  if (e.$metadata?.httpStatusCode === 403 || e.name === "AccessDenied") {
    return new ConfigError(
      `Access denied reading ${where}: the function's role needs s3:GetObject on it and s3:ListBucket on the ` +
        "bucket (without ListBucket S3 answers a missing key with 403, which cannot be told from a hidden bundle)",
      { cause },
    );
  }
  return new UnavailableError(`Cannot read ${where}: ${e.name ?? "Error"}: ${e.message ?? String(cause)}`, {
    cause,
  });
}
