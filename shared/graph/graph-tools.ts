import * as z from "zod";
import { isUrn, tenantOf } from "../domain/urn.ts";
import { ValidationError } from "../kernel/errors.ts";
import type { PolicyEngine } from "../ports/policy.ts";
import type { ToolContext } from "../ports/tools.ts";
import type { Principal } from "../store/resource-access.ts";
import type { BuiltinFunction } from "../tools/service/builtin-function.ts";
import { authorizeGraph } from "./graph-access.ts";
import { GRAPH_LIMITS, type GraphStore, type Triple, type TriplePattern } from "./graph-store.ts";
import type { ObjectTerm, TermScope } from "./terms.ts";
import { GENID_PREFIX, MAX_IRI_CHARS, MAX_LITERAL_CHARS, PREFIXES } from "./vocabulary.ts";

/** The term parser and its RDF library, loaded by the first graph call (most steps make none). */
const terms = () => import("./terms.ts");

/**
 * The graph tools (built-ins): graph_add, graph_query, graph_remove. The tenant is the task's
 * (the root of `context.taskId`), never an argument; the assistant must be of it (the tenant
 * boundary), and the policy must allow `graph.write` / `graph.read` on it (besides `tool.call`,
 * which the tool service decides). Terms are written as terms.ts says.
 */
export interface GraphToolDeps {
  graph: GraphStore;
  policy?: PolicyEngine | undefined;
}

const iri = z
  .string()
  .min(1)
  .max(MAX_IRI_CHARS + 2);
const literal = z
  .object({
    value: z.string().max(MAX_LITERAL_CHARS),
    language: z.string().min(1).max(35).optional(),
    datatype: iri.optional(),
  })
  .strict();
const object = z.union([iri, literal]);
const triple = z.object({ subject: iri, predicate: iri, object }).strict();

const TERMS =
  `Terms: an IRI (https://..., urn:..., or a prefixed name: ${Object.keys(PREFIXES).join(", ")}), ` +
  "a cld: URN of one of your tenant's resources, or for an object a literal " +
  '{"value": "...", "language": "en"} or {"value": "42", "datatype": "xsd:integer"}.';

/** The tenant of the call (the task's) and who acts, as the graph checks see them. */
function callOf(context: ToolContext): { tenant: string; principal: Principal } {
  const tenant = tenantOf(context.taskId);
  if (!tenant) throw new ValidationError(`Task ${context.taskId} belongs to no tenant: it has no graph`);
  // The actor is the assistant's URN, whose root is its tenant. Anything else is of no tenant (so
  // the boundary refuses it), never of the task's: an actor the task vouched for itself would let
  // a call that names another tenant's task through.
  const actorTenant = isUrn(context.actor) ? tenantOf(context.actor) : undefined;
  return {
    tenant,
    principal: { id: context.actor, kind: "agent", ...(actorTenant ? { tenant: actorTenant } : {}) },
  };
}

async function parseTriples(
  raw: readonly z.output<typeof triple>[],
  scope: TermScope,
  field: string,
): Promise<TriplePattern[]> {
  const { parseTerm } = await terms();
  return raw.map((t, i) => ({
    subject: parseTerm(t.subject, `${field}[${i}].subject`, scope, false),
    predicate: parseTerm(t.predicate, `${field}[${i}].predicate`, scope, false),
    object: parseTerm(t.object, `${field}[${i}].object`, scope, true),
  })) as TriplePattern[];
}

// Strict: no argument names a tenant or anything else the call does not take. Made once: a tool
// service opened per engine converts each to the JSON Schema the model sees once per process.
const ADD_SCHEMA = z.object({ triples: z.array(triple).min(1).max(GRAPH_LIMITS.triplesPerCall) }).strict();
const QUERY_SCHEMA = z
  .object({
    patterns: z.array(triple).min(1).max(GRAPH_LIMITS.patternsPerQuery),
    limit: z.number().int().min(1).max(GRAPH_LIMITS.resultsPerQuery).default(20),
  })
  .strict();
const REMOVE_SCHEMA = z
  .object({ patterns: z.array(triple).min(1).max(GRAPH_LIMITS.triplesPerCall) })
  .strict();

export function graphAdd(deps: GraphToolDeps): BuiltinFunction {
  const schema = ADD_SCHEMA;
  return {
    description:
      "Adds facts to your tenant's knowledge graph (RDF triples: subject, predicate, object), for later " +
      `tasks to find with graph_query. At most ${GRAPH_LIMITS.triplesPerCall} triples a call. ${TERMS} ` +
      `A blank node "_:name" stands for one new node within this call; the answer gives its ${GENID_PREFIX}... IRI.`,
    schema,
    pure: true, // only Arbor's own graph changes, and the same call adds the same triples again
    run: async (args: z.output<typeof schema>, context: ToolContext) => {
      const { tenant, principal } = callOf(context);
      const blankScope = context.idempotencyKey ?? `${context.taskId}\u0000${context.callId}`;
      const triples = (await parseTriples(args.triples, { tenant, blankScope }, "triples")) as Triple[];
      await authorizeGraph(deps.policy, principal, "graph.write", tenant);
      const result = await deps.graph.add(tenant, triples);
      const blanks = blankNodes(args.triples, triples);
      return (
        `Added ${result.changed} triple${result.changed === 1 ? "" : "s"}` +
        (result.unchanged ? ` (${result.unchanged} already there)` : "") +
        `; the graph holds ${result.total}.` +
        (blanks.length ? `\nBlank nodes: ${blanks.join(", ")}` : "")
      );
    },
  } as unknown as BuiltinFunction;
}

export function graphQuery(deps: GraphToolDeps): BuiltinFunction {
  const schema = QUERY_SCHEMA;
  return {
    description:
      "Finds facts in your tenant's knowledge graph: triple patterns where any term may be a variable " +
      '("?name"), joined on the variables they share (a SPARQL basic graph pattern: no FILTER, OPTIONAL ' +
      `or paths), up to ${GRAPH_LIMITS.patternsPerQuery} patterns. Returns each solution's variables as JSON. ${TERMS}`,
    schema,
    pure: true,
    run: async (args: z.output<typeof schema>, context: ToolContext) => {
      const { tenant, principal } = callOf(context);
      const patterns = await parseTriples(args.patterns, { tenant, variables: true }, "patterns");
      await authorizeGraph(deps.policy, principal, "graph.read", tenant);
      const { bindings, more } = await deps.graph.query(tenant, patterns, { limit: args.limit });
      const { termOutput } = await terms();
      const results = bindings.map((b) =>
        Object.fromEntries([...b].map(([name, term]) => [name, termOutput(term as ObjectTerm)])),
      );
      return JSON.stringify({ results, more });
    },
  } as unknown as BuiltinFunction;
}

export function graphRemove(deps: GraphToolDeps): BuiltinFunction {
  const schema = REMOVE_SCHEMA;
  return {
    description:
      "Removes facts from your tenant's knowledge graph: every triple matching any of the patterns " +
      `("?name" matches anything), at most ${GRAPH_LIMITS.triplesPerCall} a call (the answer says when more match). ${TERMS}`,
    schema,
    pure: true, // only Arbor's own graph changes; the same call again removes what still matches
    run: async (args: z.output<typeof schema>, context: ToolContext) => {
      const { tenant, principal } = callOf(context);
      const patterns = await parseTriples(args.patterns, { tenant, variables: true }, "patterns");
      await authorizeGraph(deps.policy, principal, "graph.write", tenant);
      const result = await deps.graph.remove(tenant, patterns);
      return (
        `Removed ${result.changed} triple${result.changed === 1 ? "" : "s"}; the graph holds ${result.total}.` +
        (result.more ? " More match: call graph_remove again." : "")
      );
    },
  } as unknown as BuiltinFunction;
}

/** `_:label = <its IRI>` for each blank node of the call, in the order given. */
function blankNodes(raw: readonly z.output<typeof triple>[], parsed: readonly Triple[]): string[] {
  const out = new Map<string, string>();
  raw.forEach((t, i) => {
    const p = parsed[i] as Triple;
    if (typeof t.subject === "string" && t.subject.startsWith("_:")) out.set(t.subject, p.subject.value);
    if (typeof t.object === "string" && t.object.startsWith("_:")) out.set(t.object, p.object.value);
  });
  return [...out].map(([label, value]) => `${label} = ${value}`);
}
