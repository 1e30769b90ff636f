import type { NamedNode, Term } from "n3";
import type { ObjectTerm, PatternTerm } from "./terms.ts";

/**
 * The graph port: a tenant's linked data (seeds/000's Graph service), RDF triples kept apart from
 * resources. Resources are the text chunks; the graph holds what assistants learn about what is
 * in them. Every call names the tenant, and a store never reads or writes across tenants: a tenant's
 * triples are reachable only through its own id (the callers take it from the task's URN or the
 * API key, never from arguments).
 *
 * Stored triples hold no blank nodes (terms.ts makes them IRIs of their call) and no variables.
 * Adapter: StateGraphStore (state-graph-store.ts) on the state store port, so on SQLite locally
 * and DynamoDB on AWS; the contract suite is test/contract/graph-store.contract.ts.
 */
export interface Triple {
  subject: NamedNode;
  predicate: NamedNode;
  object: ObjectTerm;
}

/** A triple pattern: any term may be a variable; the same variable twice must match the same term. */
export interface TriplePattern {
  subject: NamedNode | PatternTerm;
  predicate: NamedNode | PatternTerm;
  object: PatternTerm;
}

/** One solution of a query: each variable's term, by name (without `?`). */
export type Binding = ReadonlyMap<string, Term>;

export interface GraphWrite {
  /** Triples added or removed now. */
  changed: number;
  /** Triples that were already there (add) or matched nothing more (remove: always 0). */
  unchanged: number;
  /** Triples the tenant's graph holds after the call. */
  total: number;
  /** remove: more triples match than one call removes (MAX_TRIPLES_PER_CALL); call again. */
  more?: boolean;
}

export interface QueryResult {
  bindings: Binding[];
  /** More solutions exist than `limit`. */
  more: boolean;
}

/** The bounds every adapter holds (the contract suite checks them). */
export const GRAPH_LIMITS = {
  /** Triples one add or remove may write: DynamoDB writes at most 100 items in one transaction. */
  triplesPerCall: 50,
  /** Triples a tenant's graph holds at most (default; an adapter may be given less). */
  triplesPerTenant: 10_000,
  /** Bytes of N-Triples a tenant's graph holds at most (a query loads the graph in memory). */
  bytesPerTenant: 8_000_000,
  /** Patterns one query joins. */
  patternsPerQuery: 8,
  /** Solutions one query returns at most. */
  resultsPerQuery: 100,
  /** Triples a query may look at while joining, before it is refused as too broad. */
  stepsPerQuery: 200_000,
} as const;

export interface GraphStore {
  /** Adds triples (at most triplesPerCall); those already there are counted, not written again. */
  add(tenant: string, triples: readonly Triple[]): Promise<GraphWrite>;
  /**
   * Removes every triple matching any of the patterns (each on its own, not joined), at most
   * triplesPerCall in one call (in key order), with `more` when others match.
   */
  remove(tenant: string, patterns: readonly TriplePattern[]): Promise<GraphWrite>;
  /** The solutions of a basic graph pattern (the patterns joined on their shared variables). */
  query(
    tenant: string,
    patterns: readonly TriplePattern[],
    options?: { limit?: number },
  ): Promise<QueryResult>;
  /** How many triples the tenant's graph holds. */
  count(tenant: string): Promise<number>;
}
