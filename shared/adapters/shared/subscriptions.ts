import { ConflictError } from "../../kernel/errors.ts";
import { compilePattern } from "../../kernel/event-pattern/index.ts";
import type { BusEnvelope, Subscription } from "../../ports/event-bus.ts";

/** The named, pattern-compiled subscriptions every EventBus adapter keeps. */
export interface CompiledSubscription extends Subscription {
  match: (event: unknown) => boolean;
}

interface Held extends CompiledSubscription {
  /** Its place in the order subscriptions were added (deliveries go out in that order). */
  seq: number;
  /** The detail-types its pattern names as plain values, when it names only such: it matches no other. */
  types: readonly string[] | undefined;
}

/**
 * Subscriptions by name, and by the detail-types their patterns name: an event is matched only
 * against the subscriptions of its detail-type and those whose patterns name none (or name them by
 * an operator), not against every stream and observer open.
 */
export class SubscriptionRegistry {
  readonly #subs = new Map<string, Held>();
  readonly #byType = new Map<string, Held[]>();
  #anyType: Held[] = [];
  #seq = 0;

  /** Compiles the pattern (throws InvalidPatternError) and returns a remover for this one subscription. */
  add(subscription: Subscription): () => void {
    if (this.#subs.has(subscription.name)) {
      throw new ConflictError(`A subscription named ${subscription.name} already exists`, {
        subscription: subscription.name,
      });
    }
    const held: Held = {
      ...subscription,
      match: compilePattern(subscription.pattern),
      seq: this.#seq++,
      types: plainDetailTypes(subscription.pattern),
    };
    this.#subs.set(subscription.name, held);
    if (held.types) for (const t of held.types) this.#byType.set(t, [...(this.#byType.get(t) ?? []), held]);
    else this.#anyType = [...this.#anyType, held];
    return () => {
      // Only this subscription: a newer one under the same name stays.
      if (this.#subs.get(subscription.name) !== held) return;
      this.#subs.delete(subscription.name);
      if (!held.types) this.#anyType = this.#anyType.filter((s) => s !== held);
      for (const t of held.types ?? []) {
        const left = (this.#byType.get(t) ?? []).filter((s) => s !== held);
        if (left.length > 0) this.#byType.set(t, left);
        else this.#byType.delete(t);
      }
    };
  }

  /** Subscriptions whose pattern matches, optionally only the one with that name, in the order added. */
  matching(event: BusEnvelope, name?: string): CompiledSubscription[] {
    if (name !== undefined) {
      const one = this.#subs.get(name);
      return one?.match(event) ? [one] : [];
    }
    const typed = this.#byType.get(event["detail-type"]) ?? [];
    const candidates =
      typed.length === 0
        ? this.#anyType
        : this.#anyType.length === 0
          ? typed
          : [...typed, ...this.#anyType].sort((a, b) => a.seq - b.seq);
    return candidates.filter((s) => s.match(event));
  }

  clear(): void {
    this.#subs.clear();
    this.#byType.clear();
    this.#anyType = [];
  }
}

/** The pattern's detail-types when it names them as plain strings only (no operator, no $or). */
function plainDetailTypes(pattern: Subscription["pattern"]): readonly string[] | undefined {
  const p = pattern as Record<string, unknown>;
  if (Object.hasOwn(p, "$or")) return undefined;
  const types = p["detail-type"];
  return Array.isArray(types) && types.length > 0 && types.every((t) => typeof t === "string")
    ? [...new Set(types as string[])]
    : undefined;
}
