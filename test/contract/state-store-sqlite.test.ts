import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { stateStoreContract } from "./state-store.contract.ts";

stateStoreContract("SQLite file (libsql)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-state-"));
  const store = new SqliteStateStore({ path: join(dir, "state.db") });
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

stateStoreContract("SQLite in memory (libsql)", async () => {
  const store = new SqliteStateStore({ path: ":memory:" });
  return { store, cleanup: () => store.close() };
});
