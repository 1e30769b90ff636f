import { type RemovalPolicy, Stack } from "aws-cdk-lib";
import { CfnIndex, CfnVectorBucket } from "aws-cdk-lib/aws-s3vectors";
import { Construct } from "constructs";
import { META_KEY } from "../../shared/adapters/vectors/s3-vectors-index.ts";

/**
 * The S3 Vectors index the engine embeds into: Titan Text Embeddings v2 at 1,024 dimensions,
 * cosine distance. `S3VectorsIndex.open` (shared/adapters/vectors/s3-vectors-index.ts) refuses an
 * index whose tags do not name the embedder it was built for, so the tags here are the same ones
 * the adapter writes when it creates an index itself; test/unit/infra/engine-stack.test.ts checks
 * them against the adapter and the engine's embedder.
 */
export const VECTOR_INDEX = {
  dataType: "float32",
  dimension: 1024,
  distanceMetric: "cosine",
  /** The adapter keeps each record's own metadata as JSON under this key, never filtered on. */
  nonFilterableMetadataKeys: [META_KEY],
  tags: {
    "arbor:embedder-id": "bedrock:amazon.titan-embed-text-v2:0@1024",
    "arbor:dimension": "1024",
  },
} as const;

/** The Bedrock model id of the embedder named in the index tags. */
export const EMBEDDING_MODEL_ID = "amazon.titan-embed-text-v2:0";

export interface VectorStoreProps {
  /** The bucket is named `arbor-<stage>-vectors-<account>`. */
  readonly stage: string;
  readonly removalPolicy: RemovalPolicy;
}

/** A vector bucket (SSE-S3, the service default) with the engine's one index. */
export class VectorStore extends Construct {
  readonly bucketName: string;
  readonly bucketArn: string;
  readonly indexName: string;
  readonly indexArn: string;

  constructor(scope: Construct, id: string, props: VectorStoreProps) {
    super(scope, id);
    // Functions address the bucket by name (the S3 Vectors API takes names), so it is named here
    // rather than by CloudFormation; the account keeps it unique if a stage is deployed twice.
    this.bucketName = `arbor-${props.stage}-vectors-${Stack.of(this).account}`;
    // The index is named after its embedding space: another embedder means another index.
    this.indexName = "resources-titan-v2-1024";
    const bucket = new CfnVectorBucket(this, "Bucket", { vectorBucketName: this.bucketName });
    bucket.applyRemovalPolicy(props.removalPolicy);
    const index = new CfnIndex(this, "Index", {
      vectorBucketArn: bucket.attrVectorBucketArn,
      indexName: this.indexName,
      dataType: VECTOR_INDEX.dataType,
      dimension: VECTOR_INDEX.dimension,
      distanceMetric: VECTOR_INDEX.distanceMetric,
      metadataConfiguration: { nonFilterableMetadataKeys: [...VECTOR_INDEX.nonFilterableMetadataKeys] },
      tags: Object.entries(VECTOR_INDEX.tags).map(([key, value]) => ({ key, value })),
    });
    index.applyRemovalPolicy(props.removalPolicy);
    this.bucketArn = bucket.attrVectorBucketArn;
    this.indexArn = index.attrIndexArn;
  }
}
