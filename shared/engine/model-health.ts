import type { ArborError } from "../kernel/errors.ts";
import type { Llm } from "../ports/llm.ts";

/**
 * What this process knows of its model: the outcome of the engine's own model calls (a streak of
 * failures and since when), and, when no call is recent, a probe of the model's endpoint (the
 * port's optional `probe`: one cheap request, bounded by PROBE_TIMEOUT_MS, its answer kept for
 * PROBE_TTL_MS and shared by whoever asks meanwhile), so that /healthz never waits long and never
 * sends a model request per health check. A model without a probe (Bedrock, the scripted one) is
 * `unknown` until a call says otherwise.
 *
 * Per process: on AWS each function instance knows its own calls (the API function makes none).
 * It keeps real time (`now`, not the engine's clock): the retries whose streak it measures sleep in
 * real time (engine/model-calls.ts).
 */
export type ModelState = "ok" | "unreachable" | "failing" | "unknown";

export interface ModelStatus {
  status: ModelState;
  /** How it is known: the engine's model calls, or a probe of the endpoint. */
  from?: "calls" | "probe";
  /** When it was last found so (ISO time). */
  at?: string;
  /** Failing since (ISO time): the first failure of the current streak. */
  since?: string;
  /** Why: the model's error, which says what to check. */
  error?: string;
}

/** A call's outcome newer than this answers a health check without a probe. */
export const RECENT_CALL_MS = 30_000;
export const PROBE_TTL_MS = 30_000;
export const PROBE_TIMEOUT_MS = 1_500;

export class ModelHealth {
  readonly #llm: Pick<Llm, "probe">;
  readonly #now: () => number;
  #lastOk: number | undefined;
  #failure: { since: number; at: number; error: ArborError } | undefined;
  #probe: { at: number; status: ModelStatus } | undefined;
  #probing: Promise<ModelStatus> | undefined;

  constructor(llm: Pick<Llm, "probe">, now: () => number = Date.now) {
    this.#llm = llm;
    this.#now = now;
  }

  succeeded(): void {
    this.#lastOk = this.#now();
    this.#failure = undefined;
  }

  failed(error: ArborError): void {
    const at = this.#now();
    this.#failure = { since: this.#failure?.since ?? at, at, error };
  }

  /** How long the current streak of failed calls has lasted (0: the last call succeeded, or none failed). */
  failingForMs(): number {
    return this.#failure ? this.#now() - this.#failure.since : 0;
  }

  /** The model's state for a health check: from recent calls, else from a probe (bounded, cached). */
  async status(): Promise<ModelStatus> {
    const now = this.#now();
    const known = this.#fromCalls();
    const lastCall = Math.max(this.#lastOk ?? 0, this.#failure?.at ?? 0);
    if (known && now - lastCall < RECENT_CALL_MS) return known;
    if (!this.#llm.probe) return known ?? { status: "unknown" };
    if (this.#probe && now - this.#probe.at < PROBE_TTL_MS) return this.#probe.status;
    this.#probing ??= this.#runProbe().finally(() => {
      this.#probing = undefined;
    });
    return this.#probing;
  }

  #fromCalls(): ModelStatus | undefined {
    const iso = (ms: number) => new Date(ms).toISOString();
    if (this.#failure)
      return {
        status: this.#failure.error.code === "UNAVAILABLE" ? "unreachable" : "failing",
        from: "calls",
        at: iso(this.#failure.at),
        since: iso(this.#failure.since),
        error: this.#failure.error.message,
      };
    return this.#lastOk === undefined ? undefined : { status: "ok", from: "calls", at: iso(this.#lastOk) };
  }

  async #runProbe(): Promise<ModelStatus> {
    const at = new Date(this.#now()).toISOString();
    let status: ModelStatus;
    try {
      await this.#llm.probe?.(AbortSignal.timeout(PROBE_TIMEOUT_MS));
      status = { status: "ok", from: "probe", at };
    } catch (error) {
      status = { status: "unreachable", from: "probe", at, error: (error as Error).message };
    }
    this.#probe = { at: this.#now(), status };
    return status;
  }
}
