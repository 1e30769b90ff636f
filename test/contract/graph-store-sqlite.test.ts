import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { StateGraphStore } from "../../shared/graph/state-graph-store.ts";
import { graphStoreContract } from "./graph-store.contract.ts";

/**
 * The graph on the local state store (SQLite, in memory and in a file). Each `open` is a graph
 * store with its own memory (its own loaded graphs) on the one state store, as the tools, the HTTP
 * API and the CLI of a data folder would be.
 */
graphStoreContract("state store on SQLite in memory", async () => {
  const store = new SqliteStateStore({ path: ":memory:" });
  return {
    open: (options = {}) => new StateGraphStore(store, options),
    cleanup: () => store.close(),
  };
});

graphStoreContract("state store on a SQLite file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-graph-"));
  const store = new SqliteStateStore({ path: join(dir, "state.db") });
  return {
    open: (options = {}) => new StateGraphStore(store, options),
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
