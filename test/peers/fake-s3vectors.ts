/**
 * A fake Amazon S3 Vectors server for tests: node:http speaking the REST-JSON protocol that
 * `@aws-sdk/client-s3vectors` uses (POST /CreateVectorBucket, /CreateIndex, /GetIndex, /DeleteIndex,
 * /PutVectors, /GetVectors, /QueryVectors, /DeleteVectors; GET /tags/{arn}), so the real client can
 * be pointed at it (`endpoint` = the fake, any region, dummy credentials). Signatures are not checked.
 *
 * Like S3 Vectors: indexes have a dimension, a float32 data type and a distance metric; vectors are
 * stored as float32; PutVectors replaces by key; at most 500 vectors per PutVectors / DeleteVectors,
 * 100 keys per GetVectors and topK 1..100; cosine indexes refuse zero vectors; NaN/Infinity are
 * refused; filterable metadata is limited to 2 KB and total metadata to 40 KB per vector; keys
 * named non-filterable at CreateIndex cannot be used in filters. Query distances are exact:
 * cosine distance = 1 - cosine similarity (computed in float64 from the stored float32 values);
 * euclidean = L2. Filters support implicit equality, $eq, $ne, $in, $nin, $exists, $and, $or; $eq
 * and $in match an array value when any element matches, as S3 Vectors documents. Errors carry
 * `x-amzn-errortype` and a JSON `message`. Unlike S3 Vectors, search is exhaustive, not approximate.
 *
 * Test hooks: `calls` (operation and vector count of every request), `failNext(operation, n, error)`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

interface StoredVector {
  data: Float32Array;
  metadata: Obj | undefined;
}
interface FakeIndex {
  name: string;
  arn: string;
  created: number;
  dimension: number;
  distanceMetric: "cosine" | "euclidean";
  nonFilterable: string[];
  vectors: Map<string, StoredVector>;
}
interface FakeBucket {
  name: string;
  arn: string;
  indexes: Map<string, FakeIndex>;
}

class ApiError extends Error {
  readonly status: number;
  readonly type: string;

  constructor(status: number, type: string, message: string) {
    super(message);
    this.status = status;
    this.type = type;
  }
}
const invalid = (message: string) => new ApiError(400, "ValidationException", message);
const notFound = (message: string) => new ApiError(404, "NotFoundException", message);

export interface FakeS3VectorsCall {
  operation: string;
  status: number;
  vectors?: number;
}

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export class FakeS3Vectors {
  readonly calls: FakeS3VectorsCall[] = [];
  private readonly buckets = new Map<string, FakeBucket>();
  private readonly tags = new Map<string, Record<string, string>>();
  private readonly failures: { operation: string; remaining: number; error: ApiError }[] = [];
  private server: Server | undefined;
  private readonly account = "123456789012";
  private readonly region = "us-east-1";

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Every vector key held, in every index (what a test checks is gone). */
  keys(): string[] {
    return [...this.buckets.values()].flatMap((b) =>
      [...b.indexes.values()].flatMap((i) => [...i.vectors.keys()]),
    );
  }

  /** The next `n` calls of `operation` fail with the given error (default: throttling). */
  failNext(operation: string, n: number, error = { status: 429, type: "TooManyRequestsException" }): void {
    this.failures.push({
      operation,
      remaining: n,
      error: new ApiError(error.status, error.type, "injected failure"),
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const operation =
      req.method === "GET" && url.pathname.startsWith("/tags/")
        ? "ListTagsForResource"
        : url.pathname.slice(1);
    let status = 200;
    let vectors: number | undefined;
    try {
      const raw = Buffer.concat(chunks).toString("utf8");
      const body: unknown = raw === "" ? {} : JSON.parse(raw);
      if (!isObj(body)) throw invalid("Request body must be a JSON object");
      vectors = Array.isArray(body.vectors)
        ? body.vectors.length
        : Array.isArray(body.keys)
          ? body.keys.length
          : undefined;
      const failure = this.failures.find((f) => f.operation === operation && f.remaining > 0);
      if (failure) {
        failure.remaining--;
        throw failure.error;
      }
      const out = this.dispatch(operation, body, url);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(out));
    } catch (e) {
      const err = e instanceof ApiError ? e : invalid(e instanceof Error ? e.message : String(e));
      status = err.status;
      res.writeHead(err.status, { "content-type": "application/json", "x-amzn-errortype": err.type });
      res.end(JSON.stringify({ message: err.message }));
    }
    this.calls.push(vectors === undefined ? { operation, status } : { operation, status, vectors });
  }

  private dispatch(op: string, b: Obj, url: URL): Obj {
    switch (op) {
      case "CreateVectorBucket": {
        const name = str(b.vectorBucketName, "vectorBucketName");
        if (!/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(name))
          throw invalid(`Invalid vector bucket name ${name}`);
        if (this.buckets.has(name))
          throw new ApiError(409, "ConflictException", `Bucket ${name} already exists`);
        const arn = `arn:aws:s3vectors:${this.region}:${this.account}:bucket/${name}`;
        this.buckets.set(name, { name, arn, indexes: new Map() });
        if (isObj(b.tags)) this.tags.set(arn, stringMap(b.tags));
        return { vectorBucketArn: arn };
      }
      case "CreateIndex": {
        const bucket = this.bucket(b);
        const name = str(b.indexName, "indexName");
        if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name)) throw invalid(`Invalid index name ${name}`);
        if (bucket.indexes.has(name))
          throw new ApiError(409, "ConflictException", `Index ${name} already exists`);
        const dimension = b.dimension;
        if (
          typeof dimension !== "number" ||
          !Number.isInteger(dimension) ||
          dimension < 1 ||
          dimension > 4096
        ) {
          throw invalid("dimension must be an integer from 1 to 4096");
        }
        if (b.dataType !== "float32") throw invalid("dataType must be float32");
        if (b.distanceMetric !== "cosine" && b.distanceMetric !== "euclidean")
          throw invalid("bad distanceMetric");
        const config = isObj(b.metadataConfiguration)
          ? b.metadataConfiguration.nonFilterableMetadataKeys
          : undefined;
        const nonFilterable = Array.isArray(config)
          ? config.map((k) => str(k, "nonFilterableMetadataKeys"))
          : [];
        if (nonFilterable.length > 10) throw invalid("At most 10 non-filterable metadata keys");
        const arn = `${bucket.arn}/index/${name}`;
        bucket.indexes.set(name, {
          name,
          arn,
          created: Math.floor(Date.now() / 1000),
          dimension,
          distanceMetric: b.distanceMetric,
          nonFilterable,
          vectors: new Map(),
        });
        if (isObj(b.tags)) this.tags.set(arn, stringMap(b.tags));
        return { indexArn: arn };
      }
      case "GetIndex": {
        const [bucket, index] = this.index(b);
        return {
          index: {
            vectorBucketName: bucket.name,
            indexName: index.name,
            indexArn: index.arn,
            creationTime: index.created,
            dataType: "float32",
            dimension: index.dimension,
            distanceMetric: index.distanceMetric,
            metadataConfiguration: { nonFilterableMetadataKeys: index.nonFilterable },
          },
        };
      }
      case "DeleteIndex": {
        const [bucket, index] = this.index(b);
        bucket.indexes.delete(index.name);
        return {};
      }
      case "ListTagsForResource": {
        const arn = decodeURIComponent(url.pathname.slice("/tags/".length));
        const known = [...this.buckets.values()].some(
          (bk) => bk.arn === arn || [...bk.indexes.values()].some((i) => i.arn === arn),
        );
        if (!known) throw notFound(`No resource ${arn}`);
        return { tags: this.tags.get(arn) ?? {} };
      }
      case "PutVectors":
        return this.putVectors(b);
      case "GetVectors": {
        const [, index] = this.index(b);
        const keys = strList(b.keys, "keys", 100);
        return {
          vectors: keys.flatMap((key) => {
            const v = index.vectors.get(key);
            if (!v) return [];
            return [
              {
                key,
                ...(b.returnData === true ? { data: { float32: [...v.data] } } : {}),
                ...(b.returnMetadata === true && v.metadata ? { metadata: v.metadata } : {}),
              },
            ];
          }),
        };
      }
      case "DeleteVectors": {
        const [, index] = this.index(b);
        for (const key of strList(b.keys, "keys", 500)) index.vectors.delete(key);
        return {};
      }
      case "QueryVectors":
        return this.queryVectors(b);
      default:
        throw new ApiError(404, "UnknownOperationException", `Unknown operation ${op}`);
    }
  }

  private putVectors(b: Obj): Obj {
    const [, index] = this.index(b);
    if (!Array.isArray(b.vectors) || b.vectors.length < 1 || b.vectors.length > 500) {
      throw invalid("vectors must hold 1 to 500 vectors");
    }
    const staged = b.vectors.map((v, i) => {
      if (!isObj(v)) throw invalid(`vectors[${i}] must be an object`);
      const key = str(v.key, `vectors[${i}].key`);
      if (key.length > 1024) throw invalid(`vectors[${i}].key is longer than 1024 characters`);
      const data = this.vectorData(v.data, index, `vectors[${i}].data`);
      const metadata = v.metadata === undefined ? undefined : v.metadata;
      if (metadata !== undefined && !isObj(metadata))
        throw invalid(`vectors[${i}].metadata must be an object`);
      if (metadata) {
        const keys = Object.keys(metadata);
        if (keys.length > 50) throw invalid(`vectors[${i}] has more than 50 metadata keys`);
        if (Buffer.byteLength(JSON.stringify(metadata)) > 40 * 1024)
          throw invalid(`vectors[${i}] metadata > 40 KB`);
        const filterable = Object.fromEntries(
          keys.filter((k) => !index.nonFilterable.includes(k)).map((k) => [k, metadata[k]]),
        );
        if (Buffer.byteLength(JSON.stringify(filterable)) > 2048) {
          throw invalid(`vectors[${i}] filterable metadata is larger than 2 KB`);
        }
      }
      return { key, data, metadata };
    });
    for (const v of staged) index.vectors.set(v.key, { data: v.data, metadata: v.metadata });
    return {};
  }

  private queryVectors(b: Obj): Obj {
    const [, index] = this.index(b);
    const topK = b.topK;
    if (typeof topK !== "number" || !Number.isInteger(topK) || topK < 1 || topK > 100) {
      throw invalid("topK must be an integer from 1 to 100");
    }
    const q = this.vectorData(b.queryVector, index, "queryVector");
    const filter = b.filter === undefined ? undefined : b.filter;
    if (filter !== undefined && !isObj(filter)) throw invalid("filter must be an object");
    if (filter) checkFilterKeys(filter, index.nonFilterable);
    const scored: { key: string; distance: number; metadata: Obj | undefined }[] = [];
    for (const [key, v] of index.vectors) {
      if (filter && !matches(filter, v.metadata ?? {})) continue;
      scored.push({ key, distance: distance(index.distanceMetric, q, v.data), metadata: v.metadata });
    }
    scored.sort((x, y) => x.distance - y.distance || (x.key < y.key ? -1 : 1));
    return {
      distanceMetric: index.distanceMetric,
      vectors: scored.slice(0, topK).map((s) => ({
        key: s.key,
        ...(b.returnDistance === true ? { distance: s.distance } : {}),
        ...(b.returnMetadata === true && s.metadata ? { metadata: s.metadata } : {}),
      })),
    };
  }

  private vectorData(raw: Json | undefined, index: FakeIndex, what: string): Float32Array {
    const list = isObj(raw) ? raw.float32 : undefined;
    if (!Array.isArray(list)) throw invalid(`${what} must be {float32: number[]}`);
    if (list.length !== index.dimension) {
      throw invalid(`${what} has ${list.length} dimensions; the index has ${index.dimension}`);
    }
    if (!list.every((x) => typeof x === "number" && Number.isFinite(x)))
      throw invalid(`${what}: NaN or Infinity`);
    const data = Float32Array.from(list as number[]);
    if (index.distanceMetric === "cosine" && data.every((x) => x === 0)) {
      throw invalid(`${what}: zero vectors are not allowed for the cosine distance metric`);
    }
    return data;
  }

  private bucket(b: Obj): FakeBucket {
    const name =
      typeof b.vectorBucketName === "string"
        ? b.vectorBucketName
        : typeof b.vectorBucketArn === "string"
          ? b.vectorBucketArn.split("bucket/")[1]
          : undefined;
    const bucket = name === undefined ? undefined : this.buckets.get(name);
    if (!bucket) throw notFound(`Vector bucket ${name ?? "(none given)"} does not exist`);
    return bucket;
  }

  private index(b: Obj): [FakeBucket, FakeIndex] {
    if (typeof b.indexArn === "string") {
      const m = /bucket\/([^/]+)\/index\/(.+)$/.exec(b.indexArn);
      if (!m) throw invalid(`Bad index ARN ${b.indexArn}`);
      return this.index({ vectorBucketName: m[1] as string, indexName: m[2] as string });
    }
    const bucket = this.bucket(b);
    const index = bucket.indexes.get(str(b.indexName, "indexName"));
    if (!index) throw notFound(`Index ${String(b.indexName)} does not exist in ${bucket.name}`);
    return [bucket, index];
  }
}

function str(v: Json | undefined, what: string): string {
  if (typeof v !== "string" || v.length === 0) throw invalid(`${what} must be a non-empty string`);
  return v;
}
function strList(v: Json | undefined, what: string, max: number): string[] {
  if (!Array.isArray(v) || v.length < 1 || v.length > max)
    throw invalid(`${what} must hold 1 to ${max} items`);
  return v.map((x) => str(x, what));
}
function stringMap(o: Obj): Record<string, string> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, String(v)]));
}

function distance(metric: "cosine" | "euclidean", a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  let l2 = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    dot += x * y;
    na += x * x;
    nb += y * y;
    l2 += (x - y) ** 2;
  }
  return metric === "cosine" ? 1 - dot / Math.sqrt(na * nb) : Math.sqrt(l2);
}

const LOGICAL = new Set(["$and", "$or"]);
function checkFilterKeys(filter: Obj, nonFilterable: readonly string[]): void {
  for (const [k, v] of Object.entries(filter)) {
    if (LOGICAL.has(k)) {
      if (!Array.isArray(v) || v.length === 0) throw invalid(`${k} needs a non-empty array of filters`);
      for (const f of v) {
        if (!isObj(f)) throw invalid(`${k} items must be filters`);
        checkFilterKeys(f, nonFilterable);
      }
    } else if (k.startsWith("$")) {
      throw invalid(`Unsupported filter operator ${k}`);
    } else if (nonFilterable.includes(k)) {
      throw invalid(`Metadata key ${k} is non-filterable`);
    }
  }
}

const scalarEq = (value: Json | undefined, want: Json): boolean =>
  Array.isArray(value) ? value.some((x) => x === want) : value === want;

function matches(filter: Obj, metadata: Obj): boolean {
  return Object.entries(filter).every(([k, cond]) => {
    if (k === "$and") return (cond as Obj[]).every((f) => matches(f, metadata));
    if (k === "$or") return (cond as Obj[]).some((f) => matches(f, metadata));
    const value = metadata[k];
    if (!isObj(cond)) return scalarEq(value, cond);
    return Object.entries(cond).every(([op, arg]) => {
      switch (op) {
        case "$eq":
          return scalarEq(value, arg);
        case "$ne":
          return value !== undefined && !scalarEq(value, arg);
        case "$in":
          if (!Array.isArray(arg) || arg.length === 0) throw invalid("$in needs a non-empty array");
          return arg.some((x) => scalarEq(value, x));
        case "$nin":
          if (!Array.isArray(arg) || arg.length === 0) throw invalid("$nin needs a non-empty array");
          return value !== undefined && !arg.some((x) => scalarEq(value, x));
        case "$exists":
          return (value !== undefined) === (arg === true);
        default:
          throw invalid(`Unsupported filter operator ${op}`);
      }
    });
  });
}
