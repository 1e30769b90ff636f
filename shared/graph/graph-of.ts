import type { StateStore } from "../ports/state-store.ts";
import type { GraphStore } from "./graph-store.ts";

const perState = new WeakMap<StateStore, GraphStore>();

/**
 * The graph store of a state store, loaded at its first call: the store and the RDF library it
 * parses and writes with are a chunk of their own in a function's bundle, which only a graph call
 * reads (most invocations make none). The store itself is state-graph-store.ts's `graphStoreOf`:
 * one per state store in a process, so the tools, the HTTP API and the CLI share one cache.
 */
export function graphStoreOf(state: StateStore): GraphStore {
  let graph = perState.get(state);
  if (!graph) {
    let store: Promise<GraphStore> | undefined;
    const load = () => {
      store ??= import("./state-graph-store.ts").then(
        (m) => m.graphStoreOf(state),
        (error: unknown) => {
          store = undefined; // a failed load is tried again by the next call
          throw error;
        },
      );
      return store;
    };
    graph = {
      add: async (tenant, triples) => (await load()).add(tenant, triples),
      remove: async (tenant, patterns) => (await load()).remove(tenant, patterns),
      query: async (tenant, patterns, options) => (await load()).query(tenant, patterns, options),
      count: async (tenant) => (await load()).count(tenant),
    };
    perState.set(state, graph);
  }
  return graph;
}
