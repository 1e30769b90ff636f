import { DataFactory, Store } from "n3";
import { describe, expect, it } from "vitest";
import { TooLargeError, ValidationError } from "../../shared/errors.ts";
import { evaluateBgp } from "../../shared/graph/bgp.ts";
import { GRAPH_LIMITS } from "../../shared/graph/graph-store.ts";

const { namedNode: iri, variable: v, quad } = DataFactory;

/** The basic graph pattern evaluator: joins, distinct solutions, and its bounds. */
function storeOf(n: number): Store {
  const store = new Store();
  for (let i = 0; i < n; i++) store.addQuad(quad(iri(`urn:s:${i}`), iri("urn:p"), iri(`urn:o:${i % 7}`)));
  return store;
}
const wide = { subject: v("a"), predicate: v("p"), object: v("b") };

describe("evaluateBgp", () => {
  it("refuses a query that would look at too many triples, saying how to narrow it", () => {
    // Two unrelated wide patterns and a third that never matches: a cross product of 200 x 200.
    const patterns = [
      wide,
      { subject: v("c"), predicate: v("q"), object: v("d") },
      { subject: v("b"), predicate: iri("urn:none"), object: v("a") },
    ];
    // Constants first: the pattern that matches nothing is tried early, so this ends at once...
    expect(evaluateBgp(storeOf(200), patterns, { limit: 10, maxSteps: 1_000 }).bindings).toEqual([]);
    // ...but a search that must look at more triples than its bound is stopped there.
    const cross = [wide, { subject: v("c"), predicate: v("q"), object: v("d") }];
    expect(() => evaluateBgp(storeOf(200), cross, { limit: 100, maxSteps: 50 })).toThrow(TooLargeError);
    expect(() => evaluateBgp(storeOf(200), cross, { limit: 100, maxSteps: 50 })).toThrow(
      /looked at more than 50 triples without finishing: add constants or shared variables/,
    );
  });

  it("gives distinct solutions, at most the limit, and says there are more", () => {
    const result = evaluateBgp(
      storeOf(50),
      [
        { subject: v("s"), predicate: iri("urn:p"), object: v("o") },
        { subject: v("s2"), predicate: iri("urn:p"), object: v("o") },
      ],
      { limit: 5 },
    );
    expect(result.bindings).toHaveLength(5);
    expect(result.more).toBe(true);
    const objects = evaluateBgp(storeOf(50), [{ subject: v("s"), predicate: iri("urn:p"), object: v("o") }], {
      limit: 100,
    });
    expect(objects.bindings).toHaveLength(50);
  });

  it("takes between one and the most patterns", () => {
    expect(() => evaluateBgp(storeOf(1), [], { limit: 1 })).toThrow(ValidationError);
    const many = Array.from({ length: GRAPH_LIMITS.patternsPerQuery + 1 }, () => wide);
    expect(() => evaluateBgp(storeOf(1), many, { limit: 1 })).toThrow(/at most 8 patterns, not 9/);
  });
});
