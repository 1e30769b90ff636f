import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteObjectStore } from "../../shared/adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { feedContract } from "./feed.contract.ts";

feedContract("SQLite (libsql, a file)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-feed-"));
  const state = new SqliteStateStore({ path: join(dir, "state.db") });
  const objects = new SqliteObjectStore({ path: join(dir, "objects.db") });
  return {
    state,
    objects,
    cleanup: async () => {
      await state.close();
      await objects.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});
