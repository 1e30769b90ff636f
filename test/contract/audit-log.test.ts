import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteAuditLog } from "../../shared/adapters/local/sqlite-audit-log.ts";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { EventLogAudit } from "../../shared/adapters/shared/event-log-audit.ts";
import { auditLogContract } from "./audit-log.contract.ts";

auditLogContract("SQLite file (local default)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-audit-"));
  const audit = new SqliteAuditLog({ path: join(dir, "arbor.db") });
  return {
    audit,
    cleanup: async () => {
      await audit.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

auditLogContract("event log of a state store (SQLite in memory)", async () => {
  const state = new SqliteStateStore({ path: ":memory:" });
  return { audit: new EventLogAudit(state), cleanup: () => state.close() };
});
