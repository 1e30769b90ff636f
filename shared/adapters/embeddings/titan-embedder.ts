import { type BedrockRuntimeClient, InvokeModelCommand } from "@aws-sdk/client-bedrock-runtime";
import * as z from "zod";
import {
  ConfigError,
  ModelError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../kernel/errors.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import {
  type Attempt,
  checkTexts,
  defaultSleep,
  mapPool,
  toUnitVector,
  withRetries,
} from "./embedder-support.ts";

/**
 * Embedder on Amazon Bedrock Titan Text Embeddings v2 (`amazon.titan-embed-text-v2:0`) through
 * InvokeModel. Titan embeds one text per request: body `{inputText, dimensions, normalize: true}`,
 * answer `{embedding, inputTextTokenCount}`; texts go out with at most `concurrency` requests in
 * flight. Throttling (ThrottlingException, 429) and transient failures (503, 500, model not ready,
 * model timeout) are retried with exponential backoff up to `maxAttempts` per text; then the call
 * fails with ThrottledError or UnavailableError. Bad input is a ValidationError, missing access
 * or model a ConfigError.
 *
 * The retries here are per text; give the client `maxAttempts: 1` to avoid multiplying them with
 * the SDK's own retry strategy (or keep the SDK's and set `maxAttempts: 1` here).
 */
export const TITAN_TEXT_V2 = "amazon.titan-embed-text-v2:0";
/** Titan v2 accepts up to 8,192 tokens and 50,000 characters per text. */
export const TITAN_MAX_CHARS = 50_000;

export interface TitanEmbedderOptions {
  client: BedrockRuntimeClient;
  dimension: 256 | 512 | 1024;
  /** Requests in flight at once (default 8). */
  concurrency?: number;
  /** Attempts per text, including the first (default 5). */
  maxAttempts?: number;
  /** Injected for tests (default: setTimeout). */
  sleep?: (ms: number) => Promise<void>;
  /** First backoff delay; doubles per attempt, with full jitter (default 200 ms). */
  baseDelayMs?: number;
}

const TitanResponse = z.object({
  embedding: z.array(z.number()),
  inputTextTokenCount: z.number().int().nonnegative(),
});

const THROTTLED = new Set(["ThrottlingException", "TooManyRequestsException"]);
const TRANSIENT = new Set([
  "ServiceUnavailableException",
  "InternalServerException",
  "ModelNotReadyException",
  "ModelTimeoutException",
  "TimeoutError",
  "ECONNRESET",
  "ECONNREFUSED",
]);
const CONFIG = new Set(["AccessDeniedException", "ResourceNotFoundException", "UnrecognizedClientException"]);

export class TitanEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  private readonly client: BedrockRuntimeClient;
  private readonly concurrency: number;
  private readonly maxAttempts: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly baseDelayMs: number;

  constructor(options: TitanEmbedderOptions) {
    if (![256, 512, 1024].includes(options.dimension)) {
      throw new ConfigError(
        `Titan Text Embeddings v2 supports 256, 512 or 1024 dimensions, not ${options.dimension}`,
      );
    }
    this.client = options.client;
    this.dimension = options.dimension;
    this.id = `bedrock:${TITAN_TEXT_V2}@${options.dimension}`;
    this.concurrency = Math.max(1, options.concurrency ?? 8);
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 5);
    this.sleep = options.sleep ?? defaultSleep;
    this.baseDelayMs = options.baseDelayMs ?? 200;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    checkTexts(texts, TITAN_MAX_CHARS);
    return mapPool(texts, this.concurrency, (text, i) => this.embedOne(text, i));
  }

  private embedOne(text: string, index: number): Promise<Float32Array> {
    const body = JSON.stringify({ inputText: text, dimensions: this.dimension, normalize: true });
    return withRetries(
      this.maxAttempts,
      this.sleep,
      this.baseDelayMs,
      async (): Promise<Attempt<Float32Array>> => {
        try {
          const out = await this.client.send(
            new InvokeModelCommand({
              modelId: TITAN_TEXT_V2,
              contentType: "application/json",
              accept: "application/json",
              body,
            }),
          );
          return { ok: true, value: this.parse(out.body, index) };
        } catch (e) {
          return classify(e, index);
        }
      },
      (last, attempts) => {
        const message = `Bedrock ${TITAN_TEXT_V2} failed for texts[${index}] after ${attempts} attempts: ${last.message}`;
        return THROTTLED.has(last.name)
          ? new ThrottledError(message, { cause: last })
          : new UnavailableError(message, { cause: last });
      },
    );
  }

  private parse(body: Uint8Array | undefined, index: number): Float32Array {
    let json: unknown;
    try {
      json = JSON.parse(new TextDecoder().decode(body ?? new Uint8Array()));
    } catch (e) {
      throw new ModelError(`Bedrock ${TITAN_TEXT_V2} answered texts[${index}] with invalid JSON`, {
        cause: e,
      });
    }
    const parsed = TitanResponse.safeParse(json);
    if (!parsed.success) {
      throw new ModelError(`Bedrock ${TITAN_TEXT_V2} answered texts[${index}] without an embedding`, {
        cause: parsed.error,
      });
    }
    if (parsed.data.embedding.length !== this.dimension) {
      throw new ModelError(
        `Bedrock ${TITAN_TEXT_V2} returned ${parsed.data.embedding.length} dimensions for texts[${index}]; expected ${this.dimension}`,
      );
    }
    return toUnitVector(parsed.data.embedding, `Bedrock ${TITAN_TEXT_V2}`);
  }
}

function classify(e: unknown, index: number): Attempt<never> {
  if (e instanceof ModelError) return { ok: false, retry: false, error: e };
  const err = e instanceof Error ? e : new UnavailableError(`Bedrock ${TITAN_TEXT_V2} failed: ${String(e)}`);
  const name = err.name;
  const code = (e as { code?: unknown }).code;
  const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (THROTTLED.has(name) || status === 429) {
    if (!THROTTLED.has(name)) err.name = "ThrottlingException";
    return { ok: false, retry: true, error: err };
  }
  if (
    TRANSIENT.has(name) ||
    (typeof code === "string" && TRANSIENT.has(code)) ||
    (status !== undefined && status >= 500)
  ) {
    return { ok: false, retry: true, error: err };
  }
  const message = `Bedrock ${TITAN_TEXT_V2} refused texts[${index}]: ${name}: ${err.message}`;
  if (CONFIG.has(name) || status === 401 || status === 403) {
    return { ok: false, retry: false, error: new ConfigError(message, { cause: e }) };
  }
  if (name === "ValidationException" || status === 400) {
    return { ok: false, retry: false, error: new ValidationError(message, [], { cause: e }) };
  }
  return { ok: false, retry: false, error: new UnavailableError(message, { cause: e }) };
}
