import { DataFactory } from "n3";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { StateGraphStore } from "../../shared/graph/state-graph-store.ts";

/**
 * One writer process of graph-processes.test.ts: `node graph-writer-process.ts <db>
 * <name> <cap>` opens the SQLite file as a tool service would, sends 10 adds of 5 triples of its
 * own at once (a tenant's cap of <cap> triples), and prints one JSON line: each add's outcome.
 */
const [file, name, cap] = process.argv.slice(2) as [string, string, string];
const state = new SqliteStateStore({ path: file });
const graph = new StateGraphStore(state, { maxTriples: Number(cap) });
const { namedNode: iri } = DataFactory;
const outcomes = await Promise.all(
  Array.from({ length: 10 }, (_, i) =>
    graph
      .add(
        "acme",
        Array.from({ length: 5 }, (_, j) => ({
          subject: iri(`urn:x:${name}-${i}-${j}`),
          predicate: iri("urn:x:p"),
          object: iri("urn:x:o"),
        })),
      )
      .then(
        (r) => `added ${r.changed}`,
        (e: Error) => `${e.constructor.name}: ${e.message}`,
      ),
  ),
);
process.stdout.write(`${JSON.stringify({ name, outcomes })}\n`);
await state.close();
