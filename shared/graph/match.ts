import { ValidationError } from "../kernel/errors.ts";
import type { GraphStore } from "./graph-store.ts";
import { type ObjectTerm, type PatternTerm, parseTerm, type TermInput, termOutput } from "./terms.ts";

/**
 * One triple pattern as people write it (the HTTP API's `?s=&p=&o=`, `arbor graph query s p o`):
 * each term as the graph tools take it, or absent to match anything; the object may be a literal
 * as JSON (`{"value":"Ada","language":"en"}`). The answer: the matching triples as the tools show
 * terms, whether more match, and how many triples the tenant's graph holds.
 */
export interface ShownTriple {
  subject: TermInput;
  predicate: TermInput;
  object: TermInput;
}

export interface PatternText {
  s?: string | undefined;
  p?: string | undefined;
  o?: string | undefined;
}

export async function matchTriples(
  graph: GraphStore,
  tenant: string,
  given: PatternText,
  limit: number,
): Promise<{ triples: ShownTriple[]; more: boolean; total: number }> {
  const scope = { tenant, variables: true };
  const term = (raw: string | undefined, name: "s" | "p" | "o"): PatternTerm =>
    parseTerm(raw === undefined ? `?${name}` : name === "o" ? objectOf(raw) : raw, name, scope, name === "o");
  const pattern = { subject: term(given.s, "s"), predicate: term(given.p, "p"), object: term(given.o, "o") };
  const { bindings, more } = await graph.query(tenant, [pattern], { limit });
  const at = (b: ReadonlyMap<string, unknown>, position: PatternTerm) =>
    termOutput((position.termType === "Variable" ? b.get(position.value) : position) as ObjectTerm);
  return {
    triples: bindings.map((b) => ({
      subject: at(b, pattern.subject),
      predicate: at(b, pattern.predicate),
      object: at(b, pattern.object),
    })),
    more,
    total: await graph.count(tenant),
  };
}

/** An object as given: a literal when it is JSON (`{"value": ...}`), else an IRI or a variable. */
function objectOf(raw: string): unknown {
  if (!raw.trimStart().startsWith("{")) return raw;
  try {
    return JSON.parse(raw);
  } catch (cause) {
    throw new ValidationError(
      `o is not a literal as JSON (${(cause as Error).message}): give {"value": "..."}`,
    );
  }
}
