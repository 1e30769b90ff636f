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
  /** With `types`: the URNs its pattern names as plain `detail.urn` values (one request's observer). */
  urns: readonly string[] | undefined;
}

/**
 * Subscriptions by name, and by the detail-types their patterns name: an event is matched only
 * against the subscriptions of its detail-type and those whose patterns name none (or name them by
 * an operator), not against every stream and observer open. A pattern that also names its
 * `detail.urn` values (a request's observer waiting for one output) is kept by type and URN: an
 * event meets only the observers of its own URN, however many requests wait.
 */
export class SubscriptionRegistry {
  readonly #subs = new Map<string, Held>();
  readonly #byType = new Map<string, Held[]>();
  readonly #byTypeUrn = new Map<string, Held[]>();
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
      urns: plainUrns(subscription.pattern),
    };
    this.#subs.set(subscription.name, held);
    const keys = this.#keysOf(held);
    if (keys) for (const [map, k] of keys) map.set(k, [...(map.get(k) ?? []), held]);
    else this.#anyType = [...this.#anyType, held];
    return () => {
      // Only this subscription: a newer one under the same name stays.
      if (this.#subs.get(subscription.name) !== held) return;
      this.#subs.delete(subscription.name);
      if (!keys) this.#anyType = this.#anyType.filter((s) => s !== held);
      for (const [map, k] of keys ?? []) {
        const left = (map.get(k) ?? []).filter((s) => s !== held);
        if (left.length > 0) map.set(k, left);
        else map.delete(k);
      }
    };
  }

  /** Where a subscription is kept: by type and URN, by type, or (undefined) among those of any type. */
  #keysOf({ types, urns }: Held): [Map<string, Held[]>, string][] | undefined {
    if (!types) return undefined;
    if (!urns) return types.map((t) => [this.#byType, t]);
    return types.flatMap((t) =>
      urns.map((u): [Map<string, Held[]>, string] => [this.#byTypeUrn, typeUrnKey(t, u)]),
    );
  }

  /** Subscriptions whose pattern matches, optionally only the one with that name, in the order added. */
  matching(event: BusEnvelope, name?: string): CompiledSubscription[] {
    if (name !== undefined) {
      const one = this.#subs.get(name);
      return one?.match(event) ? [one] : [];
    }
    const type = event["detail-type"];
    // An array value (nested ones flattened) matches a pattern that names any of its elements, as
    // EventBridge does and the compiled pattern does.
    const urn = (event.detail as { urn?: unknown } | undefined)?.urn;
    const urns = Array.isArray(urn) ? urn.flat(Number.POSITIVE_INFINITY) : [urn];
    const lists = [
      this.#byType.get(type),
      ...urns.map((u) => (typeof u === "string" ? this.#byTypeUrn.get(typeUrnKey(type, u)) : undefined)),
      this.#anyType,
    ].filter((l): l is Held[] => l !== undefined && l.length > 0);
    const candidates =
      lists.length === 1 ? (lists[0] as Held[]) : [...new Set(lists.flat())].sort((a, b) => a.seq - b.seq);
    return candidates.filter((s) => s.match(event));
  }

  clear(): void {
    this.#subs.clear();
    this.#byType.clear();
    this.#byTypeUrn.clear();
    this.#anyType = [];
  }
}

const typeUrnKey = (type: string, urn: string) => `${type}\u0000${urn}`;

/** The pattern's `detail.urn` values when it names them as plain strings only. */
function plainUrns(pattern: Subscription["pattern"]): readonly string[] | undefined {
  const detail = (pattern as Record<string, unknown>).detail;
  if (!detail || typeof detail !== "object" || Object.hasOwn(detail, "$or")) return undefined;
  const urns = (detail as Record<string, unknown>).urn;
  return Array.isArray(urns) && urns.length > 0 && urns.every((u) => typeof u === "string")
    ? [...new Set(urns as string[])]
    : undefined;
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
