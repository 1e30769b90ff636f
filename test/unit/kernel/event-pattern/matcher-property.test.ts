/** Property tests for the event-pattern matcher over random JSON events. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compilePattern,
  type EventPattern,
  matchesPattern,
} from "../../../../shared/kernel/event-pattern/index.ts";

type Scalar = string | number | boolean | null;

const isScalar = (v: unknown): v is Scalar =>
  v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean";

/** Small pools so that generated values often collide with the anything-but operand. */
const operand = fc.oneof(
  fc.constantFrom("a", "b", "", "initializing"),
  fc.constantFrom(0, 1, 123, -2.5),
  fc.string(),
);
const scalar: fc.Arbitrary<Scalar> = fc.oneof(
  operand,
  fc.boolean(),
  fc.constant(null),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const ABSENT = Symbol("absent");
/** Keys that are not `$or` (a pattern operator) and cannot disturb a plain object. */
const key = fc.string({ maxLength: 6 }).filter((k) => k !== "$or" && k !== "__proto__");
const jsonEvent = fc.dictionary(key, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 });

describe("anything-but", () => {
  it("matches exactly when the field is present and not equal to the operand", () => {
    fc.assert(
      fc.property(jsonEvent, operand, fc.oneof(fc.constant<typeof ABSENT>(ABSENT), scalar), (rest, v, x) => {
        const event = { ...rest, detail: x === ABSENT ? { other: 1 } : { other: 1, x } };
        const expected = x !== ABSENT && x !== v;
        expect(matchesPattern({ detail: { x: [{ "anything-but": v }] } }, event)).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  it("over arrays, matches when some scalar element differs from the operand", () => {
    const flatten = (v: unknown): Scalar[] =>
      Array.isArray(v) ? v.flatMap(flatten) : isScalar(v) ? [v] : [];
    fc.assert(
      fc.property(
        operand,
        fc.array(fc.oneof(scalar, fc.array(scalar, { maxLength: 3 })), { maxLength: 4 }),
        (v, x) => {
          const expected = flatten(x).some((element) => element !== v);
          expect(matchesPattern({ x: [{ "anything-but": v }] }, { x })).toBe(expected);
        },
      ),
      { numRuns: 300 },
    );
  });
});

/**
 * Builds an exact-match pattern from an event's own values: every scalar field becomes `[value]`,
 * every non-empty object a nested pattern, every array holding a scalar `[one of its scalars]`.
 */
function patternFrom(event: Readonly<Record<string, unknown>>): EventPattern | undefined {
  const entries: [string, unknown][] = [];
  for (const [k, value] of Object.entries(event)) {
    if (k === "$or") continue; // an operator in patterns, not a field name
    if (isScalar(value)) {
      entries.push([k, [value]]);
    } else if (Array.isArray(value)) {
      const leaves: Scalar[] = value.flat(Number.POSITIVE_INFINITY).filter(isScalar);
      const last = leaves[leaves.length - 1];
      if (last !== undefined) entries.push([k, [last]]);
    } else if (typeof value === "object" && value !== null) {
      const nested = patternFrom(value as Record<string, unknown>);
      if (nested !== undefined) entries.push([k, nested]);
    }
  }
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

describe("exact match", () => {
  it("a pattern built from an event's own leaf values always matches that event", () => {
    fc.assert(
      fc.property(jsonEvent, (event) => {
        const pattern = patternFrom(event);
        fc.pre(pattern !== undefined);
        expect(compilePattern(pattern)(event)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it("changing one matched scalar to a value of another type makes it fail", () => {
    fc.assert(
      fc.property(key, fc.string(), (k, s) => {
        const pattern = { detail: { [k]: [s] } };
        expect(matchesPattern(pattern, { detail: { [k]: s } })).toBe(true);
        expect(matchesPattern(pattern, { detail: { [k]: s.length } })).toBe(false);
        expect(matchesPattern(pattern, { detail: {} })).toBe(false);
      }),
      { numRuns: 200 },
    );
  });
});
