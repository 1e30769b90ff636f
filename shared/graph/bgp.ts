import type { Store, Term } from "n3";
import { TooLargeError, ValidationError } from "../kernel/errors.ts";
import { type Binding, GRAPH_LIMITS, type QueryResult, type TriplePattern } from "./graph-store.ts";

/**
 * A basic graph pattern over an n3 Store: the patterns joined on their shared variables, depth
 * first, each next pattern the one with the most terms bound so far (so a constant narrows the
 * search before a wide pattern runs). Solutions are distinct; `limit + 1` are sought so `more`
 * is known. No FILTER, OPTIONAL, UNION or paths: SPARQL's BGP only. A query that looks at more
 * than `maxSteps` triples is refused (TooLargeError) rather than left to run.
 */
export function evaluateBgp(
  store: Store,
  patterns: readonly TriplePattern[],
  options: { limit: number; maxSteps?: number },
): QueryResult {
  if (patterns.length === 0) throw new ValidationError("A query needs at least one pattern");
  if (patterns.length > GRAPH_LIMITS.patternsPerQuery)
    throw new ValidationError(
      `A query joins at most ${GRAPH_LIMITS.patternsPerQuery} patterns, not ${patterns.length}: split it`,
    );
  const maxSteps = options.maxSteps ?? GRAPH_LIMITS.stepsPerQuery;
  const out: Binding[] = [];
  const seen = new Set<string>();
  let steps = 0;

  const visit = (remaining: readonly TriplePattern[], binding: Map<string, Term>): boolean => {
    if (remaining.length === 0) {
      const key = [...binding].map(([k, v]) => `${k}=${v.termType}:${v.id}`).join("\u0000");
      if (!seen.has(key)) {
        seen.add(key);
        out.push(new Map(binding));
      }
      return out.length > options.limit; // enough: one more than the limit tells `more`
    }
    const index = mostBound(remaining, binding);
    const pattern = remaining[index] as TriplePattern;
    const rest = remaining.filter((_, i) => i !== index);
    const [s, p, o] = [pattern.subject, pattern.predicate, pattern.object].map((t) => resolve(t, binding));
    for (const quad of store.readQuads(s ?? null, p ?? null, o ?? null, null)) {
      if (++steps > maxSteps)
        throw new TooLargeError(
          `The query looked at more than ${maxSteps} triples without finishing: add constants or shared variables to narrow it`,
          { maxSteps },
        );
      // The store holds n3's own terms (what it was given); its typings say RDF/JS's.
      const terms = [quad.subject, quad.predicate, quad.object] as unknown as Term[];
      const next = bind(pattern, terms, binding);
      if (next && visit(rest, next)) return true;
    }
    return false;
  };
  visit(patterns, new Map());
  return { bindings: out.slice(0, options.limit), more: out.length > options.limit };
}

/** The term a pattern position stands for now: a constant, a bound variable, or undefined. */
function resolve(term: Term, binding: ReadonlyMap<string, Term>): Term | undefined {
  return term.termType === "Variable" ? binding.get(term.value) : term;
}

function mostBound(patterns: readonly TriplePattern[], binding: ReadonlyMap<string, Term>): number {
  let best = 0;
  let bestScore = -1;
  patterns.forEach((p, i) => {
    const score = [p.subject, p.predicate, p.object].filter((t) => resolve(t, binding) !== undefined).length;
    if (score > bestScore) [best, bestScore] = [i, score];
  });
  return best;
}

/** The binding extended by a matched triple, or undefined when a variable would take two terms. */
function bind(
  pattern: TriplePattern,
  terms: readonly Term[],
  binding: ReadonlyMap<string, Term>,
): Map<string, Term> | undefined {
  const next = new Map(binding);
  const positions = [pattern.subject, pattern.predicate, pattern.object];
  for (let i = 0; i < 3; i++) {
    const position = positions[i] as Term;
    if (position.termType !== "Variable") continue;
    const term = terms[i] as Term;
    const had = next.get(position.value);
    if (had === undefined) next.set(position.value, term);
    else if (!had.equals(term)) return undefined;
  }
  return next;
}
