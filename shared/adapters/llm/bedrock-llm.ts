import {
  type BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
} from "@aws-sdk/client-bedrock-runtime";
import {
  ArborError,
  ModelError,
  ThrottledError,
  UnavailableError,
  ValidationError,
} from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import type { Llm, LlmRequest, LlmResponse, LlmStreamEvent } from "../../ports/llm.ts";
import { ConverseStreamAssembler, fromConverseResponse, toConverseRequest } from "./bedrock-mapping.ts";
import {
  backoffDelayMs,
  checkMaxAttempts,
  checkRequest,
  DEFAULT_MAX_ATTEMPTS,
  describeError,
  isAbortError,
  networkCode,
  sleepFor,
} from "./llm-common.ts";

/**
 * The LLM port on Amazon Bedrock's Converse and ConverseStream APIs (tool use included; the mapping
 * is in bedrock-mapping.ts).
 *
 * Errors. ThrottlingException, ServiceUnavailableException and ModelNotReadyException are retried
 * with exponential backoff and jitter; after `maxAttempts` attempts the call throws ThrottledError.
 * ValidationException is a ValidationError with Bedrock's message; AccessDeniedException and
 * ResourceNotFoundException (usually: the model is not enabled in this account and region) are an
 * ArborError (code CONFIG) that says how to enable model access; ModelErrorException and
 * ModelStreamErrorException are ModelError; anything else is UnavailableError.
 *
 * Retries and the SDK. Give the client `maxAttempts: 1` (as {@link bedrockClientConfig} does) so this
 * adapter alone retries, with its own schedule and its injectable sleep. A client that retries by
 * itself still works: the attempts the SDK made (`$metadata.attempts`) count toward `maxAttempts`, so
 * no call makes more than `maxAttempts` requests in all.
 *
 * Streams are retried only until they produced their first port event; after that an error ends the
 * stream (mapped as above).
 */
export interface BedrockLlmOptions {
  client: BedrockRuntimeClient;
  /** Model id or inference profile id, e.g. "anthropic.claude-3-5-haiku-20241022-v1:0". */
  model: string;
  /** Requests per call when Bedrock throttles (default 4, first try included). */
  maxAttempts?: number;
  /** Injectable for tests. */
  sleep?: (ms: number) => Promise<void>;
  /** Delay before attempt n+1 (default: exponential from 250 ms, capped at 8 s, with jitter). */
  retryDelayMs?: (attempt: number) => number;
}

/** Client settings that leave retrying to the adapter. */
export const bedrockClientConfig = { maxAttempts: 1 } as const;

const RETRYABLE = new Set(["ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException"]);
const NOT_ENABLED = new Set(["AccessDeniedException", "ResourceNotFoundException"]);
const MODEL_FAULT = new Set(["ModelErrorException", "ModelStreamErrorException"]);

interface SdkError {
  name: string;
  message: string;
  $metadata?: { httpStatusCode?: number; attempts?: number; requestId?: string };
}

export class BedrockLlm implements Llm {
  readonly id: string;
  readonly #client: BedrockRuntimeClient;
  readonly #model: string;
  readonly #maxAttempts: number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #retryDelayMs: (attempt: number) => number;
  readonly #log = componentLogger("bedrock-llm");

  constructor(options: BedrockLlmOptions) {
    if (!options.model) throw new ValidationError("BedrockLlm needs a model id");
    this.#client = options.client;
    this.#model = options.model;
    this.id = `bedrock:${options.model}`;
    this.#maxAttempts = checkMaxAttempts("BedrockLlm", options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
    this.#sleep = options.sleep ?? sleepFor;
    this.#retryDelayMs = options.retryDelayMs ?? ((attempt) => backoffDelayMs(attempt));
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    checkRequest(request);
    const input = toConverseRequest(request, this.#model);
    const model = input.modelId ?? this.#model;
    let used = 0;
    for (;;) {
      try {
        const output = await this.#client.send(new ConverseCommand(input), sendOptions(request));
        return fromConverseResponse(output, model);
      } catch (error) {
        used += attemptsOf(error);
        if (!(await this.#shouldRetry(error, used, model))) throw await this.#mapError(error, used, model);
      }
    }
  }

  async *stream(request: LlmRequest): AsyncIterable<LlmStreamEvent> {
    checkRequest(request);
    const input = toConverseRequest(request, this.#model);
    const model = input.modelId ?? this.#model;
    let used = 0;
    for (;;) {
      let started = false;
      try {
        const output = await this.#client.send(new ConverseStreamCommand(input), sendOptions(request));
        if (!output.stream) throw new ModelError("Bedrock's ConverseStream answered without a stream");
        const assembler = new ConverseStreamAssembler(model);
        for await (const event of output.stream) {
          const events = assembler.accept(event);
          // Once the caller has seen output, a retry would repeat it: only retry before that.
          if (events.length > 0) started = true;
          yield* events;
        }
        yield* assembler.finish();
        return;
      } catch (error) {
        if (error instanceof ArborError) throw error;
        used += attemptsOf(error);
        if (started || !(await this.#shouldRetry(error, used, model))) {
          throw await this.#mapError(error, used, model);
        }
      }
    }
  }

  async #shouldRetry(error: unknown, used: number, model: string): Promise<boolean> {
    if (!isRetryable(error) || used >= this.#maxAttempts) return false;
    const delay = this.#retryDelayMs(used);
    this.#log.warn("Bedrock asked to slow down; retrying", {
      model,
      attempt: used,
      maxAttempts: this.#maxAttempts,
      error: (error as SdkError).name,
      delayMs: Math.round(delay),
    });
    await this.#sleep(delay);
    return true;
  }

  async #mapError(error: unknown, attempts: number, model: string): Promise<unknown> {
    if (isAbortError(error) || error instanceof ArborError) return error;
    const e = error as SdkError;
    const name = typeof e?.name === "string" ? e.name : "Error";
    const details = { model, attempts, error: name, requestId: e?.$metadata?.requestId };
    if (isRetryable(error)) {
      return new ThrottledError(
        `Bedrock is throttling model ${model} (${name}: ${e.message}); gave up after ${attempts} attempt(s). ` +
          "Try again later, or ask for a higher quota (Service Quotas > Amazon Bedrock).",
        { cause: error, details },
      );
    }
    if (name === "ValidationException") {
      return new ValidationError(`Bedrock rejected the request for model ${model}: ${e.message}`, [], {
        cause: error,
      });
    }
    if (NOT_ENABLED.has(name)) {
      const region = await this.#region();
      return new ArborError(
        "CONFIG",
        `Bedrock refused model ${model}${region ? ` in ${region}` : ""} (${name}: ${e.message}). ` +
          "Enable access to it: in the AWS console open Amazon Bedrock > Model access" +
          `${region ? ` (region ${region})` : ""}, choose "Modify model access" (or "Enable specific models"), ` +
          'select the model, submit and wait until it shows "Access granted". Check too that the model id is ' +
          "right (cross-region inference profiles look like us.anthropic...) and that the IAM policy allows " +
          "bedrock:InvokeModel and bedrock:InvokeModelWithResponseStream on it.",
        { cause: error, details: { ...details, region } },
      );
    }
    if (MODEL_FAULT.has(name)) {
      return new ModelError(`Model ${model} failed on Bedrock (${name}: ${e.message})`, {
        cause: error,
        details,
      });
    }
    const code = networkCode(error);
    const where = code ? ` at ${await this.#endpoint()}` : "";
    return new UnavailableError(
      `Bedrock could not be reached${where} for model ${model}: ${describeError(error)}`,
      {
        cause: error,
        details,
      },
    );
  }

  async #region(): Promise<string | undefined> {
    try {
      const region = this.#client.config.region;
      return typeof region === "function" ? await region() : region;
    } catch {
      return undefined;
    }
  }

  async #endpoint(): Promise<string> {
    try {
      const endpoint = await this.#client.config.endpoint?.();
      if (endpoint)
        return `${endpoint.protocol}//${endpoint.hostname}${endpoint.port ? `:${endpoint.port}` : ""}`;
    } catch {
      // fall through
    }
    const region = await this.#region();
    return `bedrock-runtime.${region ?? "<region>"}.amazonaws.com`;
  }
}

function sendOptions(request: LlmRequest): { abortSignal?: AbortSignal } {
  return request.signal ? { abortSignal: request.signal } : {};
}

function isRetryable(error: unknown): boolean {
  const e = error as SdkError | undefined;
  if (!e || typeof e.name !== "string") return false;
  if (RETRYABLE.has(e.name)) return true;
  const status = e.$metadata?.httpStatusCode;
  return (status === 429 || status === 503) && !NOT_ENABLED.has(e.name) && e.name !== "ValidationException";
}

/** Requests one SDK call made: more than one when the client retries by itself. */
function attemptsOf(error: unknown): number {
  const attempts = (error as SdkError | undefined)?.$metadata?.attempts;
  return typeof attempts === "number" && attempts > 0 ? attempts : 1;
}
