import {
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  type S3Client,
} from "@aws-sdk/client-s3";
import { UnavailableError, ValidationError } from "../../kernel/errors.ts";
import {
  assertValidKey,
  type ListOptions,
  type ListPage,
  type ObjectStore,
} from "../../ports/object-store.ts";

/**
 * Objects in one S3 bucket, optionally under a key prefix (so several deployments or tests can
 * share a bucket). Listing is ListObjectsV2, one page per call, with S3's continuation token as
 * the cursor.
 */
export interface S3ObjectStoreOptions {
  client: S3Client;
  bucket: string;
  /** Prepended to every key, e.g. "arbor/"; stripped from listings. */
  keyPrefix?: string;
  /** How many GETs getMany runs at once (default 16). */
  concurrency?: number;
}

export class S3ObjectStore implements ObjectStore {
  readonly #s3: S3Client;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #concurrency: number;

  constructor(options: S3ObjectStoreOptions) {
    this.#s3 = options.client;
    this.#bucket = options.bucket;
    this.#prefix = options.keyPrefix ?? "";
    this.#concurrency = options.concurrency ?? 16;
  }

  #key(key: string): string {
    assertValidKey(key);
    return this.#prefix + key;
  }

  async put(key: string, body: Uint8Array | string, options: { contentType?: string } = {}): Promise<void> {
    const Key = this.#key(key);
    await this.#call(`write ${key}`, () =>
      this.#s3.send(
        new PutObjectCommand({
          Bucket: this.#bucket,
          Key,
          Body: body,
          ContentType: options.contentType ?? "application/octet-stream",
        }),
      ),
    );
  }

  /**
   * A URL that downloads the object without credentials for `expiresInSeconds` (at most the
   * signing credentials' own life): a presigned GET, served as an attachment of `contentType`
   * named `filename`. The presigner loads with the first link.
   */
  async signedGetUrl(
    key: string,
    options: { expiresInSeconds: number; filename: string; contentType: string },
  ): Promise<string> {
    const { getSignedUrl } = await import("@aws-sdk/s3-request-presigner");
    return getSignedUrl(
      this.#s3,
      new GetObjectCommand({
        Bucket: this.#bucket,
        Key: this.#key(key),
        ResponseContentType: options.contentType,
        ResponseContentDisposition: `attachment; filename*=UTF-8''${encodeURIComponent(options.filename)}`,
      }),
      { expiresIn: options.expiresInSeconds },
    );
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const Key = this.#key(key);
    try {
      const out = await this.#s3.send(new GetObjectCommand({ Bucket: this.#bucket, Key }));
      return out.Body ? await out.Body.transformToByteArray() : new Uint8Array();
    } catch (e) {
      if (e instanceof NoSuchKey || (e as { name?: string }).name === "NoSuchKey") return undefined;
      throw this.#unavailable(`read ${key}`, e);
    }
  }

  async getMany(keys: readonly string[]): Promise<(Uint8Array | undefined)[]> {
    const out: (Uint8Array | undefined)[] = new Array(keys.length);
    let next = 0;
    const worker = async () => {
      while (next < keys.length) {
        const i = next++;
        out[i] = await this.get(keys[i] as string);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, keys.length) }, worker));
    return out;
  }

  async delete(key: string): Promise<void> {
    const Key = this.#key(key);
    await this.#call(`delete ${key}`, () =>
      this.#s3.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key })),
    );
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const out = await this.#call(`list ${prefix}`, () =>
      this.#s3.send(
        new ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: this.#prefix + prefix,
          MaxKeys: Math.max(1, Math.min(options.limit ?? 1000, 1000)),
          ...(options.delimiter ? { Delimiter: options.delimiter } : {}),
          ...(options.cursor ? { ContinuationToken: options.cursor } : {}),
        }),
      ),
    ).catch((error: unknown) => {
      // A cursor S3 did not give (a caller's forgery, or another listing's) is bad input, not S3 being down.
      const cause = (error as { cause?: { name?: string } }).cause;
      if (options.cursor && cause?.name === "InvalidArgument")
        throw new ValidationError("This listing cursor was not made by this store; start the listing again");
      throw error;
    });
    const strip = (k: string) => k.slice(this.#prefix.length);
    const page: ListPage = {
      keys: (out.Contents ?? []).flatMap((o) => (o.Key ? [strip(o.Key)] : [])),
      prefixes: (out.CommonPrefixes ?? []).flatMap((p) => (p.Prefix ? [strip(p.Prefix)] : [])),
    };
    if (out.IsTruncated && out.NextContinuationToken) page.cursor = out.NextContinuationToken;
    return page;
  }

  async #call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw this.#unavailable(what, e);
    }
  }

  #unavailable(what: string, e: unknown): UnavailableError {
    const name = (e as { name?: string })?.name ?? "Error";
    return new UnavailableError(
      `S3 could not ${what} in bucket ${this.#bucket} (${name}); check the bucket name, region and permissions`,
      {
        cause: e,
      },
    );
  }
}
