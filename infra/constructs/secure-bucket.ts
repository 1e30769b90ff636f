import { Duration, RemovalPolicy, Validations } from "aws-cdk-lib";
import {
  BlockPublicAccess,
  Bucket,
  BucketEncryption,
  type IBucket,
  ObjectOwnership,
  TargetObjectKeyFormat,
} from "aws-cdk-lib/aws-s3";
import { Construct } from "constructs";

/** Settings every bucket of the storage layer shares. */
export interface BucketBaseProps {
  /** RETAIN outside dev; DESTROY (with its objects emptied first) only in dev stages. */
  readonly removalPolicy: RemovalPolicy;
}

export interface SecureBucketProps extends BucketBaseProps {
  /** Where S3 server access logs go. */
  readonly accessLogs: Bucket;
  /** Key prefix of this bucket's logs in the log bucket, e.g. `resources/`. */
  readonly accessLogsPrefix: string;
  /** How long an overwritten or deleted object version is kept before it expires. */
  readonly noncurrentVersionRetention: Duration;
}

/**
 * The hardening both data buckets share: every public access path blocked, ACLs disabled,
 * TLS 1.2+ enforced by bucket policy, SSE-S3 encryption, versioning with a lifecycle for
 * noncurrent versions, and server access logs.
 *
 * SSE-S3 rather than KMS: the objects are Arbor's own resources and OPA bundles, nothing here
 * needs a key policy as a second access control, and SSE-KMS would add a KMS call (and grant)
 * to every Lambda read; swap in `BucketEncryption.KMS` here if a deployment needs it.
 */
export class SecureBucket extends Construct {
  readonly bucket: Bucket;

  constructor(scope: Construct, id: string, props: SecureBucketProps) {
    super(scope, id);
    this.bucket = new Bucket(this, "Bucket", {
      ...hardening(props.removalPolicy),
      versioned: true,
      // `Bucket` declares `isWebsite` as `boolean | undefined`, which exactOptionalPropertyTypes
      // refuses for `IBucket.isWebsite?: boolean`: the same value, typed twice.
      serverAccessLogsBucket: props.accessLogs as IBucket,
      serverAccessLogsPrefix: props.accessLogsPrefix,
      targetObjectKeyFormat: TargetObjectKeyFormat.simplePrefix(),
      lifecycleRules: [
        {
          id: "noncurrent-versions",
          noncurrentVersionExpiration: props.noncurrentVersionRetention,
          expiredObjectDeleteMarker: true,
          abortIncompleteMultipartUploadAfter: Duration.days(7),
        },
      ],
    });
  }
}

export interface AccessLogBucketProps extends BucketBaseProps {
  /** How long access log objects are kept. */
  readonly retention: Duration;
}

/**
 * The target of the data buckets' server access logs. S3 log delivery only writes to buckets
 * encrypted with SSE-S3, and the delivery permission is a bucket policy for
 * `logging.s3.amazonaws.com` (feature flag `@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`).
 */
export class AccessLogBucket extends Construct {
  readonly bucket: Bucket;

  constructor(scope: Construct, id: string, props: AccessLogBucketProps) {
    super(scope, id);
    this.bucket = new Bucket(this, "Bucket", {
      ...hardening(props.removalPolicy),
      lifecycleRules: [
        {
          id: "expire-logs",
          expiration: props.retention,
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
    });
    Validations.of(this.bucket).acknowledge({
      id: "AwsSolutions-S1",
      reason:
        "This is the server access log bucket itself: logging its own accesses into itself would log " +
        "every log delivery, without end. Reads of the logs are visible in CloudTrail.",
    });
  }
}

function hardening(removalPolicy: RemovalPolicy) {
  return {
    blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
    objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
    encryption: BucketEncryption.S3_MANAGED,
    enforceSSL: true,
    minimumTLSVersion: 1.2,
    removalPolicy,
    // A versioned bucket cannot be deleted while it holds objects: in dev, empty it first.
    autoDeleteObjects: removalPolicy === RemovalPolicy.DESTROY,
  } as const;
}
