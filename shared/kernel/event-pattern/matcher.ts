/**
 * Amazon EventBridge event-pattern matching (event-bus semantics), written from the EventBridge
 * user guide. A pattern is validated once (see validate.ts) and compiled to closures; matching an
 * event walks only the fields the pattern names and never re-parses or copies the event.
 *
 * Semantics in brief:
 * - keys are AND, the elements of a value array are OR, nested objects recurse, `$or` is an OR of
 *   sub-patterns applied at the level where it appears (together with its sibling keys);
 * - a field absent from the event never matches, except `{"exists": false}`;
 * - when the event value is an array, the field matches if any element matches (nested arrays are
 *   flattened); when a nested pattern object meets an array of objects, one element must match the
 *   whole nested pattern (AWS's "array-consistent" matching);
 * - `exists` looks at leaf values only: an object, or an array holding no scalar, does not "exist".
 */
import { type Cidr, type Leaf, type ObjectNode, parseIp, parsePattern, type ValueRule } from "./validate.ts";

export type EventPattern = { readonly [key: string]: unknown };

type Predicate = (value: Leaf) => boolean;
type NodeMatcher = (node: unknown) => boolean;
type FieldMatcher = (container: Readonly<Record<string, unknown>> | undefined) => boolean;

/** Validates a pattern's shape; throws InvalidPatternError (with the JSON path of the bad part). */
export function validatePattern(pattern: unknown): EventPattern {
  parsePattern(pattern);
  return pattern as EventPattern;
}

/** Validates once, returns a fast predicate. Non-object events never match. */
export function compilePattern(pattern: unknown): (event: unknown) => boolean {
  const root = compileObject(parsePattern(pattern));
  return (event) => isObject(event) && root(event);
}

/** Convenience: compilePattern(pattern)(event). */
export function matchesPattern(pattern: unknown, event: unknown): boolean {
  return compilePattern(pattern)(event);
}

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isLeaf(value: unknown): value is Leaf {
  const t = typeof value;
  return value === null || t === "string" || t === "number" || t === "boolean";
}

function field(container: Readonly<Record<string, unknown>> | undefined, key: string): unknown {
  return container !== undefined && Object.hasOwn(container, key) ? container[key] : undefined;
}

/** True if `value` is a scalar passing `test`, or an array (at any depth) holding one. */
function anyLeaf(value: unknown, test: Predicate): boolean {
  if (Array.isArray(value)) {
    for (const element of value) if (anyLeaf(element, test)) return true;
    return false;
  }
  return isLeaf(value) && test(value);
}

function hasLeaf(value: unknown): boolean {
  return Array.isArray(value) ? value.some(hasLeaf) : isLeaf(value);
}

function compileObject(node: ObjectNode): NodeMatcher {
  const fields: FieldMatcher[] = node.fields.map((f) =>
    f.kind === "leaf" ? compileLeafField(f.key, f.rules) : compileNestedField(f.key, compileObject(f.node)),
  );
  const anyOf = node.anyOf.map(compileObject);
  return (value) => {
    const container = isObject(value) ? value : undefined;
    for (const f of fields) if (!f(container)) return false;
    if (anyOf.length === 0) return true;
    for (const alternative of anyOf) if (alternative(value)) return true;
    return false;
  };
}

function compileNestedField(key: string, nested: NodeMatcher): FieldMatcher {
  const anyElement = (array: readonly unknown[]): boolean => {
    if (array.length === 0) return nested(undefined);
    for (const element of array) {
      if (Array.isArray(element) ? anyElement(element) : nested(element)) return true;
    }
    return false;
  };
  return (container) => {
    const value = field(container, key);
    return Array.isArray(value) ? anyElement(value) : nested(value);
  };
}

function compileLeafField(key: string, rules: readonly ValueRule[]): FieldMatcher {
  let existsTrue = false;
  let existsFalse = false;
  const valueRules: ValueRule[] = [];
  for (const rule of rules) {
    if (rule.kind !== "exists") valueRules.push(rule);
    else if (rule.value) existsTrue = true;
    else existsFalse = true;
  }
  const test = valueRules.length > 0 ? compileAnyOf(valueRules) : undefined;
  const checksExistence = existsTrue || existsFalse;
  return (container) => {
    const value = field(container, key);
    if (value === undefined) return existsFalse;
    if (test !== undefined && anyLeaf(value, test)) return true;
    if (!checksExistence) return false;
    return hasLeaf(value) ? existsTrue : existsFalse;
  };
}

/** OR of value rules: exact scalars go into hash sets, the rest become predicates. */
function compileAnyOf(rules: readonly ValueRule[]): Predicate {
  const strings = new Set<string>();
  const numbers = new Set<number>();
  let matchTrue = false;
  let matchFalse = false;
  let matchNull = false;
  const predicates: Predicate[] = [];
  for (const rule of rules) {
    if (rule.kind !== "exact") predicates.push(compileRule(rule));
    else if (typeof rule.value === "string") strings.add(rule.value);
    else if (typeof rule.value === "number") numbers.add(rule.value);
    else if (rule.value === null) matchNull = true;
    else if (rule.value) matchTrue = true;
    else matchFalse = true;
  }
  return (value) => {
    if (typeof value === "string") {
      if (strings.has(value)) return true;
    } else if (typeof value === "number") {
      if (numbers.has(value)) return true;
    } else if (value === null) {
      if (matchNull) return true;
    } else if (value ? matchTrue : matchFalse) {
      return true;
    }
    for (const predicate of predicates) if (predicate(value)) return true;
    return false;
  };
}

function compileRule(rule: Exclude<ValueRule, { kind: "exact" }>): Predicate {
  switch (rule.kind) {
    case "prefix": {
      const prefix = rule.ignoreCase ? rule.value.toLowerCase() : rule.value;
      return rule.ignoreCase
        ? (v) => typeof v === "string" && v.toLowerCase().startsWith(prefix)
        : (v) => typeof v === "string" && v.startsWith(prefix);
    }
    case "suffix": {
      const suffix = rule.ignoreCase ? rule.value.toLowerCase() : rule.value;
      return rule.ignoreCase
        ? (v) => typeof v === "string" && v.toLowerCase().endsWith(suffix)
        : (v) => typeof v === "string" && v.endsWith(suffix);
    }
    case "equals-ignore-case": {
      const lower = rule.value.toLowerCase();
      return (v) => typeof v === "string" && v.toLowerCase() === lower;
    }
    case "wildcard": {
      const parts = rule.parts;
      return (v) => typeof v === "string" && wildcardMatches(parts, v);
    }
    case "numeric": {
      const { lower, lowerInclusive, upper, upperInclusive } = rule.range;
      return (v) =>
        typeof v === "number" &&
        (lowerInclusive ? v >= lower : v > lower) &&
        (upperInclusive ? v <= upper : v < upper);
    }
    case "cidr": {
      const cidr = rule.cidr;
      return (v) => typeof v === "string" && inCidr(v, cidr);
    }
    case "anything-but": {
      const excluded = compileAnyOf(rule.excluded);
      return (v) => !excluded(v);
    }
    case "exists":
      // Existence is a property of the field, handled in compileLeafField; never a value test.
      return () => false;
  }
}

/** `parts` are the literal runs between unescaped `*`; each `*` matches any run, even empty. */
function wildcardMatches(parts: readonly string[], value: string): boolean {
  const first = parts[0] ?? "";
  if (parts.length === 1) return value === first;
  const last = parts[parts.length - 1] ?? "";
  if (value.length < first.length + last.length || !value.startsWith(first) || !value.endsWith(last)) {
    return false;
  }
  const end = value.length - last.length;
  let position = first.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] ?? "";
    const found = value.indexOf(part, position);
    if (found < 0 || found + part.length > end) return false;
    position = found + part.length;
  }
  return true;
}

function inCidr(value: string, cidr: Cidr): boolean {
  const address = parseIp(value);
  if (address === undefined || address.length !== cidr.bytes.length) return false;
  const whole = cidr.bits >> 3;
  for (let i = 0; i < whole; i++) if (address[i] !== cidr.bytes[i]) return false;
  const rest = cidr.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return ((address[whole] ?? 0) & mask) === ((cidr.bytes[whole] ?? 0) & mask);
}
