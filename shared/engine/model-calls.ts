import { ArborError } from "../kernel/errors.ts";
import { ATTR, contentCaptured, inSpan, recordModelCall, SpanKind, tracingOn } from "../kernel/tracing.ts";
import type { LlmRequest, LlmResponse } from "../ports/llm.ts";
import type { EngineDeps } from "./context.ts";
import { costOf } from "./usage.ts";

/**
 * Every model call of the engine's steps (plan, a leaf's turn, an evaluation), the same on both
 * runtimes. The adapters already retry what the provider asks to retry (429, 503, throttling) a few
 * times within one call; here the engine decides what a failure that remains means for the task:
 *
 * - the model is unavailable or throttling (a server down or restarting, a network that drops):
 *   tried again in the step, backing off, until the failure has lasted `settings.modelRetryMs`
 *   (ARBOR_MODEL_RETRY_MS) for this process's calls, or this step has waited that long: a model
 *   that comes back in time is used, and the task goes on;
 * - then, or at once when the model refuses the configuration (CONFIG: a wrong key, URL or model
 *   id, model access not granted), which no retry mends: LastingModelFailure, and the step fails
 *   its task with the reason and what to do, rather than leaving it waiting for good;
 * - anything else (a malformed answer, a request the server rejects, an error of ours) is thrown
 *   as before: the step fails and the bus retries it.
 *
 * Each outcome is kept in deps.modelHealth, which /healthz reads.
 */
export class LastingModelFailure extends ArborError {
  constructor(message: string, cause: ArborError) {
    super(cause.code, message, { cause, details: cause.details });
  }
}

const TRANSIENT = new Set(["UNAVAILABLE", "THROTTLED"]);
const LASTING = new Set(["CONFIG"]);
/** In-step backoff: 500 ms doubling, at most 5 s between attempts. */
const backoffMs = (attempt: number) => Math.min(5_000, 500 * 2 ** (attempt - 1));

export async function callModel(deps: EngineDeps, request: LlmRequest): Promise<LlmResponse> {
  if (!tracingOn()) return callWithRetries(deps, request);
  const { provider, model } = modelOf(deps.llm.id, request.model);
  return inSpan(
    `chat ${model}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        [ATTR.operation]: "chat",
        [ATTR.provider]: provider,
        [ATTR.requestModel]: model,
        [ATTR.maxTokens]: request.maxTokens,
        [ATTR.temperature]: request.temperature,
        ...(contentCaptured()
          ? {
              [ATTR.systemInstructions]: bounded(request.system),
              [ATTR.inputMessages]: bounded(JSON.stringify(request.messages)),
            }
          : {}),
      },
    },
    async (span) => {
      const started = performance.now();
      const measured = { [ATTR.operation]: "chat", [ATTR.provider]: provider, [ATTR.requestModel]: model };
      let response: LlmResponse;
      try {
        response = await callWithRetries(deps, request);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        recordModelCall(
          { ...measured, [ATTR.errorType]: typeof code === "string" ? code : "Error" },
          undefined,
          (performance.now() - started) / 1000,
        );
        throw error;
      }
      recordModelCall(
        { ...measured, [ATTR.responseModel]: response.model },
        response.usage,
        (performance.now() - started) / 1000,
      );
      const cost = costOf(deps, response.model, response.usage);
      span.setAll({
        [ATTR.responseModel]: response.model,
        [ATTR.inputTokens]: response.usage.inputTokens,
        [ATTR.outputTokens]: response.usage.outputTokens,
        [ATTR.finishReasons]: [response.stopReason],
        [ATTR.costUsd]: cost,
        ...(cost === undefined ? { [ATTR.costUnknown]: 1 } : {}),
        ...(contentCaptured()
          ? {
              [ATTR.outputMessages]: bounded(
                JSON.stringify([
                  { role: "assistant", content: response.content, toolCalls: response.toolCalls },
                ]),
              ),
            }
          : {}),
      });
      return response;
    },
  );
}

/** The provider (as the GenAI conventions name them) and the model of a call. */
function modelOf(llmId: string, requested: string | undefined): { provider: string; model: string } {
  const [kind, ...rest] = llmId.split(":");
  const configured = rest.length ? rest.join(":") : llmId;
  const provider = kind === "bedrock" ? "aws.bedrock" : kind === "openai" ? "openai" : "arbor.scripted";
  return { provider, model: requested ?? configured };
}

/** Content in a span is kept to 16 KiB: spans are not transcripts (those are the task's resources). */
const bounded = (text: string | undefined): string | undefined =>
  text === undefined || text.length <= 16_384 ? text : `${text.slice(0, 16_384)}…`;

async function callWithRetries(deps: EngineDeps, request: LlmRequest): Promise<LlmResponse> {
  const health = deps.modelHealth;
  const windowMs = deps.settings.modelRetryMs;
  let waited = 0;
  for (let attempt = 1; ; attempt++) {
    try {
      const response = await deps.llm.complete(request);
      health.succeeded();
      return response;
    } catch (error) {
      if (!(error instanceof ArborError) || !(TRANSIENT.has(error.code) || LASTING.has(error.code)))
        throw error;
      health.failed(error);
      const lasted = Math.max(health.failingForMs(), waited);
      if (LASTING.has(error.code) || lasted >= windowMs) {
        const failure = new LastingModelFailure(
          LASTING.has(error.code)
            ? error.message
            : `${error.message} (failing for ${Math.round(lasted / 100) / 10} s, ${attempt} attempt(s) in this step)`,
          error,
        );
        deps.log.error("the model failed for good: the task that called it fails", {
          error: failure.message,
          code: error.code,
        });
        throw failure;
      }
      const delay = Math.min(backoffMs(attempt), windowMs - lasted);
      deps.log.warn("the model failed; trying again", {
        error: error.message,
        attempt,
        delayMs: delay,
        failingForMs: health.failingForMs(),
        retryForMs: windowMs,
      });
      await new Promise((resolve) => setTimeout(resolve, delay));
      waited += delay;
    }
  }
}

/** What a task's failure says when its model failed for good: the model's reason, and what to do. */
export function modelFailureReason(what: string, failure: LastingModelFailure): string {
  const said = failure.message.trimEnd();
  return `${what}: ${said}${said.endsWith(".") ? "" : "."} Once the model answers, send the request again.`;
}
