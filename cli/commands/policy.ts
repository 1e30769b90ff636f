import type { Command } from "../command.ts";

export const policy: Command = {
  name: "policy",
  usage: ["policy publish <bundle.tar.gz> [--bucket <PoliciesBucketName>] [--prefix <key prefix>]"],
  summary: "check an OPA bundle loads, then upload it with its sha256 to the policies bucket",
  options: [
    [
      "--bucket <name>",
      "the bucket (default ARBOR_POLICIES_BUCKET: storage stack output PoliciesBucketName)",
    ],
    ["--prefix <prefix>", "a key prefix (default ARBOR_POLICIES_PREFIX)"],
  ],
  examples: ["arbor policy publish policies/bundle.tar.gz --bucket my-stack-policies"],
  notes: [
    "AWS credentials and AWS_REGION from the SDK's default chain; ARBOR_S3_ENDPOINT points the client elsewhere.",
  ],

  async local({ args, options, write }) {
    const { loadOperatorSettings } = await import("../../shared/runtime/config.ts");
    const { policyCommand } = await import("../lib/policy.ts");
    await policyCommand(
      args[0],
      { file: args[1], bucket: options.bucket, prefix: options.prefix },
      loadOperatorSettings(),
      write,
    );
  },
};
