import { createHash } from "node:crypto";
import {
  CreateIndexCommand,
  DeleteVectorsCommand,
  GetIndexCommand,
  type Index,
  ListTagsForResourceCommand,
  PutVectorsCommand,
  QueryVectorsCommand,
  type S3VectorsClient,
} from "@aws-sdk/client-s3vectors";
import { ancestors, isUrn } from "../../domain/urn.ts";
import {
  ArborError,
  ConfigError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../kernel/errors.ts";
import type {
  EmbeddingSpace,
  VectorIndex,
  VectorMatch,
  VectorQuery,
  VectorRecord,
} from "../../ports/vector-index.ts";
import { assertValidSpace, checkQuery, checkRecords, describeSpace, spaceMismatch } from "./vector-checks.ts";

/**
 * VectorIndex on Amazon S3 Vectors (`@aws-sdk/client-s3vectors`): one vector index in a vector
 * bucket, cosine distance, float32. Similarity score = 1 - cosine distance.
 *
 * The embedding space lives on the index itself: its `dimension` (checked with GetIndex) and two
 * tags set at CreateIndex, `arbor:embedder-id` and `arbor:dimension` (read with
 * ListTagsForResource). `open` refuses an index of another space, or one without these tags.
 *
 * Metadata per vector (S3 Vectors filters on metadata only; it has no key-prefix filter):
 *   - `arbor_type` (filterable): the record's type;
 *   - `arbor_within` (filterable, list): for every proper ancestor URN `a` of the key, a 16-hex
 *     SHA-256 digest of `a + "/"`, the prefix under which the key lies. `$eq` on a list matches any
 *     element, so `keyPrefix: "<urn>/"` becomes `{arbor_within: {$eq: digest("<urn>/")}}`;
 *     digests keep the filterable part small (2 KB limit) for deep trees;
 *   - `arbor_meta` (non-filterable, declared at CreateIndex): the record's own metadata as JSON.
 * Supported key prefixes: "" (everything) and "<urn>/" for any URN (a tenant, a conversation, a
 * task...), i.e. whole URN elements. Other prefixes are refused with a ValidationError. Keys must be
 * URNs. Matches are also checked against the prefix and type on the client side.
 *
 * Limits (S3 Vectors documentation): 500 vectors per PutVectors and DeleteVectors call (larger
 * writes are split), topK 1..100, keys up to 1024 characters, 2 KB filterable and 40 KB total
 * metadata per vector. S3 Vectors search is approximate; filters are applied during the search, so
 * a filtered query may return fewer than topK matches when few records match.
 */
export interface S3VectorsIndexOptions {
  client: S3VectorsClient;
  vectorBucketName: string;
  indexName: string;
  space: EmbeddingSpace;
  /** Create the index (tagged with the space) when it does not exist. Default false. */
  createIfMissing?: boolean;
}

export const EMBEDDER_TAG = "arbor:embedder-id";
export const DIMENSION_TAG = "arbor:dimension";
const TYPE_KEY = "arbor_type";
const WITHIN_KEY = "arbor_within";
/** The metadata key holding each record's own metadata (declared non-filterable at CreateIndex). */
export const META_KEY = "arbor_meta";
const BATCH = 500;
const MAX_TOP_K = 100;

/** A JSON document, as S3 Vectors filters are. */
type FilterDocument = string | number | boolean | null | FilterDocument[] | { [key: string]: FilterDocument };

/** Digest of a key prefix, as stored in `arbor_within`. */
export const prefixDigest = (prefix: string): string =>
  createHash("sha256").update(prefix).digest("hex").slice(0, 16);

export class S3VectorsIndex implements VectorIndex {
  readonly space: EmbeddingSpace;
  private readonly client: S3VectorsClient;
  private readonly target: { vectorBucketName: string; indexName: string };

  private constructor(options: S3VectorsIndexOptions) {
    this.client = options.client;
    this.space = { embedderId: options.space.embedderId, dimension: options.space.dimension };
    this.target = { vectorBucketName: options.vectorBucketName, indexName: options.indexName };
  }

  /** Opens (or, with createIfMissing, creates) the index and checks that it belongs to `space`. */
  static async open(options: S3VectorsIndexOptions): Promise<S3VectorsIndex> {
    assertValidSpace(options.space);
    const self = new S3VectorsIndex(options);
    const where = `s3vectors://${options.vectorBucketName}/${options.indexName}`;
    let index = await self.describe(where);
    if (!index && options.createIfMissing) {
      await self.create(where);
      index = await self.describe(where);
    }
    if (!index) {
      throw new ConfigError(
        `Vector index ${where} does not exist: create it (cosine, float32, dimension ${options.space.dimension}, ` +
          `tags ${EMBEDDER_TAG}=${options.space.embedderId}) or open it with createIfMissing`,
      );
    }
    if (index.distanceMetric !== "cosine") {
      throw new ConfigError(
        `Vector index ${where} uses ${index.distanceMetric} distance; Arbor needs cosine`,
      );
    }
    const tags = await self.call("ListTagsForResource", () =>
      options.client.send(new ListTagsForResourceCommand({ resourceArn: index.indexArn })),
    );
    const embedderId = tags.tags?.[EMBEDDER_TAG];
    if (embedderId === undefined) {
      throw new ConfigError(
        `Vector index ${where} has no ${EMBEDDER_TAG} tag, so its embedding space is unknown; expected ` +
          `${describeSpace(options.space)}. Tag it if you are sure, or let Arbor create the index.`,
      );
    }
    const stored = { embedderId, dimension: index.dimension ?? Number(tags.tags?.[DIMENSION_TAG]) };
    if (stored.embedderId !== options.space.embedderId || stored.dimension !== options.space.dimension) {
      throw spaceMismatch(where, stored, options.space);
    }
    return self;
  }

  async upsert(records: readonly VectorRecord[]): Promise<void> {
    checkRecords(records, this.space.dimension);
    const vectors = records.map((r) => {
      if (!isUrn(r.key)) throw new ValidationError(`S3 Vectors index keys must be URNs`, [r.key]);
      const within = ancestors(r.key).map((a) => prefixDigest(`${a}/`));
      const metadata: Record<string, string | string[]> = {
        [TYPE_KEY]: r.type,
        [META_KEY]: JSON.stringify(r.metadata ?? {}),
      };
      if (within.length) metadata[WITHIN_KEY] = within;
      return { key: r.key, data: { float32: Array.from(r.vector) }, metadata };
    });
    for (let i = 0; i < vectors.length; i += BATCH) {
      const batch = vectors.slice(i, i + BATCH);
      await this.call("PutVectors", () =>
        this.client.send(new PutVectorsCommand({ ...this.target, vectors: batch })),
      );
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += BATCH) {
      const batch = keys.slice(i, i + BATCH);
      await this.call("DeleteVectors", () =>
        this.client.send(new DeleteVectorsCommand({ ...this.target, keys: batch })),
      );
    }
  }

  async query(query: VectorQuery): Promise<VectorMatch[]> {
    checkQuery(query, this.space.dimension, MAX_TOP_K);
    const conditions: { [key: string]: FilterDocument }[] = [];
    if (query.type !== undefined) conditions.push({ [TYPE_KEY]: { $eq: query.type } });
    const prefix = query.keyPrefix ?? "";
    if (prefix !== "") {
      if (!prefix.endsWith("/") || !isUrn(prefix.slice(0, -1))) {
        throw new ValidationError(
          `The S3 Vectors index filters by whole URN elements: keyPrefix must be "" or "<urn>/"`,
          [`keyPrefix: ${JSON.stringify(prefix)}`],
        );
      }
      conditions.push({ [WITHIN_KEY]: { $eq: prefixDigest(prefix) } });
    }
    const filter =
      conditions.length === 0 ? undefined : conditions.length === 1 ? conditions[0] : { $and: conditions };
    const out = await this.call("QueryVectors", () =>
      this.client.send(
        new QueryVectorsCommand({
          ...this.target,
          topK: query.topK,
          queryVector: { float32: Array.from(query.vector) },
          ...(filter === undefined ? {} : { filter }),
          returnMetadata: true,
          returnDistance: true,
        }),
      ),
    );
    return (out.vectors ?? []).flatMap((v): VectorMatch[] => {
      const meta = (v.metadata ?? {}) as Record<string, unknown>;
      const type = typeof meta[TYPE_KEY] === "string" ? (meta[TYPE_KEY] as string) : "";
      if (
        v.key === undefined ||
        !v.key.startsWith(prefix) ||
        (query.type !== undefined && type !== query.type)
      ) {
        return [];
      }
      return [{ key: v.key, score: 1 - (v.distance ?? 1), type, metadata: parseMeta(meta[META_KEY]) }];
    });
  }

  private async describe(where: string): Promise<Index | undefined> {
    try {
      const out = await this.client.send(new GetIndexCommand(this.target));
      return out.index;
    } catch (e) {
      if (errorName(e) === "NotFoundException") return undefined;
      throw mapError(e, `GetIndex on ${where}`);
    }
  }

  private async create(where: string): Promise<void> {
    try {
      await this.client.send(
        new CreateIndexCommand({
          ...this.target,
          dataType: "float32",
          dimension: this.space.dimension,
          distanceMetric: "cosine",
          metadataConfiguration: { nonFilterableMetadataKeys: [META_KEY] },
          tags: { [EMBEDDER_TAG]: this.space.embedderId, [DIMENSION_TAG]: String(this.space.dimension) },
        }),
      );
    } catch (e) {
      if (errorName(e) === "ConflictException") return; // created concurrently: open() checks it
      throw mapError(e, `CreateIndex ${where}`);
    }
  }

  private async call<T>(operation: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (e) {
      throw mapError(
        e,
        `${operation} on s3vectors://${this.target.vectorBucketName}/${this.target.indexName}`,
      );
    }
  }
}

function parseMeta(raw: unknown): Record<string, string | number | boolean> {
  if (typeof raw !== "string") return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    return typeof parsed === "object" && parsed !== null
      ? (parsed as Record<string, string | number | boolean>)
      : {};
  } catch {
    return {};
  }
}

const errorName = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "name" in e ? String((e as { name: unknown }).name) : undefined;

function mapError(e: unknown, what: string): ArborError {
  if (e instanceof ArborError) return e;
  const name = errorName(e) ?? "Error";
  const message = `${what} failed: ${name}: ${e instanceof Error ? e.message : String(e)}`;
  switch (name) {
    case "TooManyRequestsException":
    case "ThrottlingException":
      return new ThrottledError(message, { cause: e });
    case "ValidationException":
      return new ValidationError(message, [], { cause: e });
    case "NotFoundException":
    case "AccessDeniedException":
    case "KmsDisabledException":
    case "KmsInvalidKeyUsageException":
    case "KmsInvalidStateException":
    case "KmsNotFoundException":
      return new ConfigError(message, { cause: e });
    default:
      return new UnavailableError(message, { cause: e });
  }
}
