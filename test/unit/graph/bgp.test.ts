import { DataFactory, Store } from "n3";
import { describe, expect, it } from "vitest";
import { evaluateBgp } from "../../../shared/graph/bgp.ts";
import { GRAPH_LIMITS } from "../../../shared/graph/graph-store.ts";
import { TooLargeError, ValidationError } from "../../../shared/kernel/errors.ts";

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

  it("8 patterns over 10,000 triples built to blow up the join: a cross product is cut at the limit, a search with no solution refused at the default bound", () => {
    const store = new Store();
    for (let i = 0; i < 10_000; i++)
      store.addQuad(
        quad(iri(`urn:n:${i % 100}`), iri(`urn:p:${i % 3}`), iri(`urn:n:${Math.floor(i / 100)}`)),
      );
    const cross = Array.from({ length: 8 }, (_, i) => ({
      subject: v(`s${i}`),
      predicate: v(`p${i}`),
      object: v(`o${i}`),
    }));
    const product = evaluateBgp(store, cross, { limit: GRAPH_LIMITS.resultsPerQuery });
    expect(product.bindings).toHaveLength(GRAPH_LIMITS.resultsPerQuery);
    expect(product.more).toBe(true);
    // A path of 7 hops over a graph where every node has 100 successors (100^8 paths), ending in a
    // pattern no triple matches (a subject that is its own predicate): no constant to start from,
    // and the failing pattern is reached only at the end of each path.
    const hops = "abcdefgh";
    const path = Array.from({ length: 7 }, (_, i) => ({
      subject: v(hops[i] as string),
      predicate: v(`q${i}`),
      object: v(hops[i + 1] as string),
    }));
    const never = [...path, { subject: v("h"), predicate: v("h"), object: v("z") }];
    expect(() => evaluateBgp(store, never, { limit: 20 })).toThrow(TooLargeError);
    expect(() => evaluateBgp(store, never, { limit: 20 })).toThrow(
      new RegExp(`more than ${GRAPH_LIMITS.stepsPerQuery} triples`),
    );
  });

  it("takes between one and the most patterns", () => {
    expect(() => evaluateBgp(storeOf(1), [], { limit: 1 })).toThrow(ValidationError);
    const many = Array.from({ length: GRAPH_LIMITS.patternsPerQuery + 1 }, () => wide);
    expect(() => evaluateBgp(storeOf(1), many, { limit: 1 })).toThrow(/at most 8 patterns, not 9/);
  });
});
