import { createHash, createHmac } from "node:crypto";
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import { ExportResultCode } from "@opentelemetry/core";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentialIdentityProvider, Checksum, SourceData } from "@smithy/types";
import { ArborError, UnavailableError } from "../../kernel/errors.ts";

/**
 * Spans to CloudWatch, where AWS users look for them (Transaction Search, Application Signals'
 * GenAI views, the X-Ray trace map): OTLP over HTTP (protobuf) to X-Ray's OTLP endpoint,
 * `https://xray.<region>.amazonaws.com/v1/traces`, signed with SigV4 by the function's own role
 * (`xray:PutSpans`). The endpoint takes W3C trace ids as they are: no X-Ray id generator.
 *
 * Chosen over the ADOT Lambda layer: no collector process beside each function (its cold start and
 * memory), no layer ARN per region and version to keep current, and the same SDK path as every
 * other OTLP endpoint. Transaction Search must be turned on once per account (docs/observability.md).
 */
export interface XRayTracesOptions {
  region: string;
  /** Default: `https://xray.<region>.amazonaws.com/v1/traces` (a VPC endpoint or a test peer otherwise). */
  url?: string;
  credentials?: AwsCredentialIdentityProvider;
  fetch?: typeof fetch;
  timeoutMs?: number;
}

/** SHA-256 for the signer, from node:crypto (HMAC when given a key, as SigV4 asks). */
class Sha256 implements Checksum {
  readonly #secret: SourceData | undefined;
  #hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  constructor(secret?: SourceData) {
    this.#secret = secret;
    this.#hash = this.#fresh();
  }
  #fresh() {
    return this.#secret === undefined
      ? createHash("sha256")
      : createHmac(
          "sha256",
          typeof this.#secret === "string" ? this.#secret : Buffer.from(this.#secret as Uint8Array),
        );
  }
  update(data: Uint8Array): void {
    this.#hash.update(data);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }
  reset(): void {
    this.#hash = this.#fresh();
  }
}

export class XRayTracesExporter implements SpanExporter {
  readonly url: string;
  readonly #signer: SignatureV4;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #pending = new Set<Promise<void>>();

  constructor(options: XRayTracesOptions) {
    this.url = options.url ?? `https://xray.${options.region}.amazonaws.com/v1/traces`;
    this.#signer = new SignatureV4({
      service: "xray",
      region: options.region,
      credentials: options.credentials ?? defaultProvider(),
      sha256: Sha256,
    });
    this.#fetch = options.fetch ?? fetch;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
  }

  export(spans: ReadableSpan[], done: (result: { code: ExportResultCode; error?: Error }) => void): void {
    const sent = this.#send(spans).then(
      () => done({ code: ExportResultCode.SUCCESS }),
      (error: unknown) => done({ code: ExportResultCode.FAILED, error: error as Error }),
    );
    this.#pending.add(sent);
    void sent.finally(() => this.#pending.delete(sent));
  }

  async #send(spans: ReadableSpan[]): Promise<void> {
    const body = ProtobufTraceSerializer.serializeRequest(spans);
    if (!body) throw new ArborError("INTERNAL", "the spans could not be serialized as OTLP protobuf");
    const url = new URL(this.url);
    const signed = await this.#signer.sign({
      method: "POST",
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: {},
      headers: { host: url.host, "content-type": "application/x-protobuf" },
      body,
    });
    const response = await this.#fetch(url, {
      method: "POST",
      headers: signed.headers,
      body,
      signal: AbortSignal.timeout(this.#timeoutMs),
    });
    if (!response.ok) {
      const said = (await response.text().catch(() => "")).slice(0, 300);
      throw new UnavailableError(
        `X-Ray's OTLP endpoint answered ${response.status}${said ? `: ${said}` : ""} (is Transaction Search on, and may the role call xray:PutSpans?)`,
      );
    }
  }

  async forceFlush(): Promise<void> {
    await Promise.all([...this.#pending]);
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
  }
}
