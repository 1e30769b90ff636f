import { deepFreeze } from "../../domain/immutable.ts";
import { UnavailableError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import type { BusEnvelope, BusEventInput, EventBus, Subscription } from "../../ports/event-bus.ts";
import { assertPublishable, toEnvelope, traced } from "../shared/bus-envelope.ts";
import { type CompiledSubscription, SubscriptionRegistry } from "../shared/subscriptions.ts";

/**
 * The event bus inside one process, with EventBridge's semantics: the same envelope, the same
 * pattern matcher, asynchronous at-least-once delivery with retries, and a dead-letter list for
 * deliveries that kept failing.
 */
export interface InProcessEventBusOptions {
  account?: string;
  region?: string;
  /** Attempts per delivery before it is dead-lettered (default 5). */
  maxAttempts?: number;
  /** Delay before attempt n+1 (default 10 ms * 2^n, capped at 1 s). */
  retryDelayMs?: (attempt: number) => number;
  /** Deliver every event this many times (default 1): tests use 2 to prove handlers are idempotent. */
  deliveries?: number;
  clock?: () => Date;
}

export interface DeadLetter {
  subscription: string;
  event: BusEnvelope;
  error: unknown;
  attempts: number;
}

export class InProcessEventBus implements EventBus {
  readonly deadLetters: DeadLetter[] = [];
  readonly #subs = new SubscriptionRegistry();
  readonly #inflight = new Set<Promise<void>>();
  readonly #opts: Required<Omit<InProcessEventBusOptions, "clock">> & { clock: () => Date };
  readonly #log = componentLogger("in-process-event-bus");
  #closed = false;

  constructor(options: InProcessEventBusOptions = {}) {
    this.#opts = {
      account: options.account ?? "000000000000",
      region: options.region ?? "local",
      maxAttempts: options.maxAttempts ?? 5,
      retryDelayMs: options.retryDelayMs ?? ((n) => Math.min(1000, 10 * 2 ** n)),
      deliveries: options.deliveries ?? 1,
      clock: options.clock ?? (() => new Date()),
    };
  }

  subscribe(subscription: Subscription): () => void {
    return this.#subs.add(subscription);
  }

  async publish(published: readonly BusEventInput[]): Promise<void> {
    if (this.#closed) throw new UnavailableError("The in-process event bus is closed");
    const events = published.map(traced);
    const details = events.map(assertPublishable);
    const now = this.#opts.clock();
    for (const [i, e] of events.entries()) {
      // As over the wire: what handlers get is a copy, taken at publish time (toEnvelope's), and
      // frozen, so one handler cannot change what another receives (they all share it).
      const envelope = toEnvelope(
        e,
        { account: this.#opts.account, region: this.#opts.region, now },
        details[i],
      );
      const subs = this.#subs.matching(envelope);
      if (subs.length === 0) continue;
      const received = deepFreeze(envelope);
      for (const sub of subs)
        for (let n = 0; n < this.#opts.deliveries; n++) this.#track(this.#deliver(sub, received));
    }
  }

  /** Resolves when no delivery is in flight (including ones that deliveries scheduled). */
  async idle(): Promise<void> {
    while (this.#inflight.size > 0) await Promise.allSettled([...this.#inflight]);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.idle();
    this.#subs.clear();
  }

  #track(p: Promise<void>): void {
    this.#inflight.add(p);
    void p.finally(() => this.#inflight.delete(p));
  }

  async #deliver(sub: CompiledSubscription, event: BusEnvelope): Promise<void> {
    // Always asynchronous, as on EventBridge: publish() never runs a handler inline.
    await new Promise<void>((resolve) => setImmediate(resolve));
    for (let attempt = 1; ; attempt++) {
      try {
        await sub.handler(event);
        return;
      } catch (error) {
        if (attempt >= this.#opts.maxAttempts) {
          this.deadLetters.push({ subscription: sub.name, event, error, attempts: attempt });
          this.#log.error("delivery failed; dead-lettered", {
            subscription: sub.name,
            eventId: event.id,
            error: error as Error,
          });
          return;
        }
        this.#log.warn("delivery failed; retrying", { subscription: sub.name, eventId: event.id, attempt });
        await new Promise((r) => setTimeout(r, this.#opts.retryDelayMs(attempt)));
      }
    }
  }
}
