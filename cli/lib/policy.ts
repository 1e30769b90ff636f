import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { ConfigError, ValidationError } from "../../shared/kernel/errors.ts";
import {
  checkPolicyBundle,
  POLICY_ENTRYPOINT,
  type PolicyBucketClient,
  policyBucket,
} from "../../shared/runtime/aws/operator-tools.ts";
import type { OperatorSettings } from "../../shared/runtime/config.ts";
import { UsageError } from "../command.ts";
import { heading, note } from "./render.ts";

/**
 * `arbor policy publish <bundle.tar.gz>`: checks that the bundle loads with the real OPA wasm
 * loader (the same code the functions run) before anything is uploaded, then publishes it to the
 * policies bucket (policy-bundle-s3.ts: the bundle with its sha256 in its metadata, then the
 * `.sha256` object) and reads it back.
 */

export interface PublishOptions {
  file: string | undefined;
  bucket: string | undefined;
  prefix: string | undefined;
}

export async function policyCommand(
  sub: string | undefined,
  options: PublishOptions,
  settings: OperatorSettings,
  write: (line: string) => void,
  client?: PolicyBucketClient,
): Promise<void> {
  if (sub !== "publish") throw new UsageError();
  const { file } = options;
  if (!file) throw new UsageError(`Name the bundle to publish.`);
  const bucket = options.bucket ?? settings.policiesBucket;
  if (!bucket)
    throw new UsageError(
      `Say which bucket: --bucket <PoliciesBucketName> or ARBOR_POLICIES_BUCKET (the storage stack's output).`,
    );
  const prefix = options.prefix ?? settings.policiesPrefix;
  let bytes: Uint8Array;
  try {
    bytes = await readFile(file);
  } catch (cause) {
    throw new ValidationError(
      `Cannot read ${file}: ${(cause as Error).message}. Build it with: opa build -t wasm -e ${POLICY_ENTRYPOINT} -o bundle.tar.gz policies/arbor.rego`,
    );
  }
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  // The same loader and checks as a function's cold start: nothing is uploaded if this fails.
  const policy = await checkPolicyBundle(bytes, sha256, file);
  write(
    `${heading("Checked")} ${file}: an OPA wasm policy with the entrypoint ${POLICY_ENTRYPOINT}, sha256 ${sha256}`,
  );

  const s3 = policyBucket(settings, client);
  const published = await s3.publish(bucket, bytes, prefix);
  const back = await s3.read(bucket, prefix);
  if (back.kind !== "bundle" || back.sha256 !== sha256) {
    throw new ConfigError(
      `s3://${bucket}/${published.keys.bundle} does not read back as the bundle just published (another publish at the same time?): publish again`,
    );
  }
  write(
    `${heading("Published")} s3://${bucket}/${published.keys.bundle} (its sha256 in x-amz-meta-sha256), then s3://${bucket}/${published.keys.sha256}`,
  );
  const minutes = settings.policyRecheckMs / 60_000;
  write(
    `${heading("Takes over")}: functions that start from now decide with it (revision ${policy.revision}); running ones at their next re-check, within ${minutes} minute${minutes === 1 ? "" : "s"} (their ARBOR_POLICY_RECHECK_MS).`,
  );
  write(
    note(
      "A bundle that stops loading makes decisions fail (never a fall back to the default policy): keep the last good bundle to publish again.",
    ),
  );
}
