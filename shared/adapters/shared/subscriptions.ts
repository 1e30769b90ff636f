import { ConflictError } from "../../kernel/errors.ts";
import { compilePattern } from "../../kernel/event-pattern/index.ts";
import type { BusEnvelope, Subscription } from "../../ports/event-bus.ts";

/** The named, pattern-compiled subscriptions every EventBus adapter keeps. */
export interface CompiledSubscription extends Subscription {
  match: (event: unknown) => boolean;
}

export class SubscriptionRegistry {
  readonly #subs = new Map<string, CompiledSubscription>();

  /** Compiles the pattern (throws InvalidPatternError) and returns a remover for this one subscription. */
  add(subscription: Subscription): () => void {
    if (this.#subs.has(subscription.name)) {
      throw new ConflictError(`A subscription named ${subscription.name} already exists`, {
        subscription: subscription.name,
      });
    }
    const compiled: CompiledSubscription = { ...subscription, match: compilePattern(subscription.pattern) };
    this.#subs.set(subscription.name, compiled);
    return () => {
      // Only this subscription: a newer one under the same name stays.
      if (this.#subs.get(subscription.name) === compiled) this.#subs.delete(subscription.name);
    };
  }

  /** Subscriptions whose pattern matches, optionally only the one with that name. */
  matching(event: BusEnvelope, name?: string): CompiledSubscription[] {
    return [...this.#subs.values()].filter((s) => (name === undefined || s.name === name) && s.match(event));
  }

  clear(): void {
    this.#subs.clear();
  }
}
