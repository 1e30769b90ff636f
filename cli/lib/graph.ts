import { GRAPH_LIMITS } from "../../shared/graph/graph-store.ts";
import { matchTriples, type ShownTriple } from "../../shared/graph/match.ts";
import { graphStoreOf } from "../../shared/graph/state-graph-store.ts";
import type { TermInput } from "../../shared/graph/terms.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";
import { UsageError } from "../command.ts";
import type { Remote } from "./remote.ts";
import { note, printable } from "./render.ts";

/**
 * `arbor graph query [s] [p] [o] [--max n]`: the triples of a tenant's graph matching one pattern,
 * one line each (N-Triples-like). Each term as the graph tools take it; `?x` or `-` (or nothing)
 * matches anything; a literal object as JSON, '{"value":"Ada","language":"en"}'. Locally: the data
 * folder's graph of ARBOR_TENANT (or --tenant), read as its operator; remotely (ARBOR_URL,
 * ARBOR_KEY): `GET /v1/graph` with the key's tenant (an admin's key).
 */

type Write = (line: string) => void;
type Shown = ShownTriple;

const wildcard = (raw: string | undefined) => raw === undefined || raw === "-" || raw.startsWith("?");
const limitOf = (max: string | undefined) => {
  const n = max === undefined ? GRAPH_LIMITS.resultsPerQuery : Number(max);
  if (!Number.isInteger(n) || n < 1 || n > GRAPH_LIMITS.resultsPerQuery)
    throw new UsageError(`--max must be a whole number from 1 to ${GRAPH_LIMITS.resultsPerQuery}`);
  return n;
};

export async function graphQueryLocal(
  state: StateStore,
  tenant: string,
  terms: readonly (string | undefined)[],
  max: string | undefined,
  write: Write,
): Promise<void> {
  const [s, p, o] = terms.map((t) => (wildcard(t) ? undefined : t));
  const answer = await matchTriples(graphStoreOf(state), tenant, { s, p, o }, limitOf(max));
  show(answer.triples, answer.more, tenant, answer.total, write);
}

export async function graphQueryRemote(
  remote: Remote,
  terms: readonly (string | undefined)[],
  max: string | undefined,
  write: Write,
): Promise<void> {
  const query = new URLSearchParams();
  (["s", "p", "o"] as const).forEach((name, i) => {
    const raw = terms[i];
    if (!wildcard(raw)) query.set(name, raw as string);
  });
  query.set("limit", String(limitOf(max)));
  const answer = await remote.get<{ tenant: string; triples: Shown[]; more: boolean; total: number }>(
    `/v1/graph?${query}`,
    { triples: "array" },
  );
  show(answer.triples, answer.more, answer.tenant, answer.total, write);
}

function show(rows: readonly Shown[], more: boolean, tenant: string, total: number, write: Write): void {
  const text = (t: TermInput) =>
    typeof t === "string"
      ? `<${t}>`
      : `${JSON.stringify(t.value)}${t.language ? `@${t.language}` : t.datatype ? `^^${t.datatype}` : ""}`;
  // JSON escapes C0 controls but not C1 ones or bidirectional overrides; a remote answer, anything.
  for (const r of rows) write(printable(`${text(r.subject)} ${text(r.predicate)} ${text(r.object)} .`));
  write(
    note(
      `${rows.length} triple${rows.length === 1 ? "" : "s"}${more ? " (more match: narrow the pattern or raise --max)" : ""}; the graph of ${printable(tenant)} holds ${total}`,
    ),
  );
}
