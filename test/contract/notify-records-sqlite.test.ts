import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { notifyRecordsContract } from "./notify-records.contract.ts";

notifyRecordsContract("SQLite file (libsql)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-notify-"));
  const store = new SqliteStateStore({ path: join(dir, "state.db") });
  return {
    store,
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
