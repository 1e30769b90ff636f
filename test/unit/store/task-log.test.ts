import { describe } from "vitest";
import { SqliteStateStore } from "../../../shared/adapters/local/sqlite-state-store.ts";
import { taskLogSuite } from "./task-log.suite.ts";

describe("TaskLog on SQLite", () => {
  taskLogSuite(async () => {
    const store = new SqliteStateStore({ path: ":memory:" });
    return { store, cleanup: () => store.close() };
  });
});
