import * as z from "zod";
import {
  ConfigError,
  ModelError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../kernel/errors.ts";
import type { Embedder } from "../../ports/embeddings.ts";
import { type Attempt, checkTexts, defaultSleep, toUnitVector, withRetries } from "./embedder-support.ts";

/**
 * Embedder on any OpenAI-compatible endpoint (OpenAI, Azure OpenAI-style gateways, Ollama, vLLM,
 * LM Studio): `POST {baseUrl}/embeddings` with `{model, input: string[]}`, answered with
 * `{data: [{index, embedding}]}`. Texts are sent in batches of `batchSize`, one batch after the
 * other; results are put back in input order by `index` and L2-normalised (not every server
 * normalises). The dimension must be configured: it is part of the id and every answer is checked
 * against it. 429 and 5xx/network failures are retried with backoff (honouring Retry-After), then
 * fail with ThrottledError / UnavailableError; 401/403/404 are a ConfigError; other 4xx a
 * ValidationError carrying the server's message.
 */
export interface OpenAIEmbedderOptions {
  /** e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1` (Ollama). */
  baseUrl: string;
  model: string;
  /** The model's output dimension (or the one requested with `sendDimensions`). Required. */
  dimension: number;
  apiKey?: string;
  /** Injected outbound fetch (default: global fetch). */
  fetch?: typeof fetch;
  /** Texts per request (default 64). */
  batchSize?: number;
  /** Attempts per batch, including the first (default 5). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  baseDelayMs?: number;
  /** Also send `dimensions` (OpenAI text-embedding-3 models can shorten their output). Default false. */
  sendDimensions?: boolean;
  /** Per-request timeout (default 60 s). */
  timeoutMs?: number;
  headers?: Record<string, string>;
}

const EmbeddingsResponse = z.object({
  data: z.array(z.object({ index: z.number().int().nonnegative(), embedding: z.array(z.number()) })),
});
const ErrorBody = z.object({ error: z.union([z.string(), z.object({ message: z.string() })]) });

export class OpenAIEmbedder implements Embedder {
  readonly id: string;
  readonly dimension: number;
  private readonly url: string;
  private readonly options: OpenAIEmbedderOptions;
  private readonly fetch: typeof fetch;
  private readonly batchSize: number;

  constructor(options: OpenAIEmbedderOptions) {
    if (!options.model) throw new ConfigError("OpenAIEmbedder needs a model name");
    if (!Number.isInteger(options.dimension) || options.dimension < 1) {
      throw new ConfigError(
        `OpenAIEmbedder needs the model's embedding dimension (a positive integer), got ${options.dimension}`,
      );
    }
    let url: URL;
    try {
      url = new URL(`${options.baseUrl.replace(/\/+$/, "")}/embeddings`);
    } catch (e) {
      throw new ConfigError(`OpenAIEmbedder baseUrl is not a URL: ${JSON.stringify(options.baseUrl)}`, {
        cause: e,
      });
    }
    this.options = options;
    this.url = url.toString();
    this.dimension = options.dimension;
    this.id = `openai:${options.model}@${options.dimension}`;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.batchSize = Math.max(1, options.batchSize ?? 64);
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    checkTexts(texts);
    const out: Float32Array[] = [];
    for (let start = 0; start < texts.length; start += this.batchSize) {
      out.push(...(await this.embedBatch(texts.slice(start, start + this.batchSize), start)));
    }
    return out;
  }

  private embedBatch(input: readonly string[], offset: number): Promise<Float32Array[]> {
    const o = this.options;
    const body = JSON.stringify({
      model: o.model,
      input,
      ...(o.sendDimensions ? { dimensions: this.dimension } : {}),
    });
    return withRetries(
      Math.max(1, o.maxAttempts ?? 5),
      o.sleep ?? defaultSleep,
      o.baseDelayMs ?? 200,
      async (): Promise<Attempt<Float32Array[]>> => {
        let res: Response;
        try {
          res = await this.fetch(this.url, {
            method: "POST",
            headers: {
              "content-type": "application/json",
              ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}),
              ...o.headers,
            },
            body,
            signal: AbortSignal.timeout(o.timeoutMs ?? 60_000),
          });
        } catch (e) {
          const error = new UnavailableError(
            `cannot reach ${this.url}: ${e instanceof Error ? e.message : String(e)}`,
            { cause: e },
          );
          return { ok: false, retry: true, error };
        }
        if (res.ok) return { ok: true, value: this.parse(await res.text(), input.length, offset) };
        return this.failure(res, offset, input.length);
      },
      (last, attempts) => {
        const message = `Embeddings endpoint ${this.url} failed after ${attempts} attempts: ${last.message}`;
        return last instanceof ThrottledError
          ? new ThrottledError(message, { cause: last })
          : new UnavailableError(message, { cause: last });
      },
    );
  }

  private async failure(res: Response, offset: number, count: number): Promise<Attempt<never>> {
    const text = await res.text().catch(() => "");
    const parsed = ErrorBody.safeParse(safeJson(text));
    const detail = parsed.success
      ? typeof parsed.data.error === "string"
        ? parsed.data.error
        : parsed.data.error.message
      : text.slice(0, 300);
    const message = `HTTP ${res.status} for texts[${offset}..${offset + count - 1}] (model ${this.options.model}): ${detail}`;
    if (res.status === 429 || res.status >= 500) {
      const retryAfter = Number(res.headers.get("retry-after"));
      const waitMs =
        Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, 60_000) : undefined;
      // Worth another attempt: throttled (429) or the endpoint failing (5xx).
      const error =
        res.status === 429
          ? new ThrottledError(message, { details: { status: res.status } })
          : new UnavailableError(message, { details: { status: res.status } });
      return waitMs === undefined
        ? { ok: false, retry: true, error }
        : { ok: false, retry: true, error, waitMs };
    }
    if (res.status === 401 || res.status === 403 || res.status === 404) {
      return {
        ok: false,
        retry: false,
        error: new ConfigError(`Embeddings endpoint ${this.url}: ${message}`),
      };
    }
    return {
      ok: false,
      retry: false,
      error: new ValidationError(`Embeddings endpoint refused the input: ${message}`),
    };
  }

  private parse(text: string, count: number, offset: number): Float32Array[] {
    const parsed = EmbeddingsResponse.safeParse(safeJson(text));
    const source = `Embeddings endpoint ${this.url} (model ${this.options.model})`;
    if (!parsed.success) throw new ModelError(`${source} answered without {data: [{index, embedding}]}`);
    const { data } = parsed.data;
    const out = new Array<Float32Array | undefined>(count).fill(undefined);
    for (const item of data) {
      if (item.index >= count || out[item.index] !== undefined) {
        throw new ModelError(
          `${source} answered with a missing, repeated or out-of-range index ${item.index}`,
        );
      }
      if (item.embedding.length !== this.dimension) {
        throw new ConfigError(
          `${source} returned ${item.embedding.length}-dimensional embeddings, but the embedder is configured ` +
            `for ${this.dimension}: set dimension to ${item.embedding.length} (and re-index) or use another model`,
        );
      }
      out[item.index] = toUnitVector(item.embedding, source);
    }
    const missing = out.indexOf(undefined);
    if (missing >= 0) throw new ModelError(`${source} returned no embedding for texts[${offset + missing}]`);
    return out as Float32Array[];
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
