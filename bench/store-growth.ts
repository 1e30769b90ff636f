import { SqliteObjectStore } from "../shared/adapters/local/sqlite-object-store.ts";
import { SqliteStateStore } from "../shared/adapters/local/sqlite-state-store.ts";

/**
 * `node bench/store-growth.ts`: does a write to the local stores cost more after a long history?
 * Writes 250,000 state records and 300,000 objects (each object write with a read of an older one)
 * into in-memory SQLite stores, and prints the process CPU time per write for each tenth. Past
 * their memory caches' limits (100,000 records; 64 MiB of objects) a write must let go of old
 * entries: that used to walk past every hole earlier deletions left in the cache's Map, and each
 * write grew slower the longer the process ran (9 -> 53 us a record, 6 -> 65 us an object).
 */
const out = (line: string) => process.stdout.write(`${line}\n`);

async function tenths(total: number, write: (i: number) => Promise<unknown>): Promise<number[]> {
  const chunk = total / 10;
  const usPerWrite: number[] = [];
  for (let c = 0; c < 10; c++) {
    const cpu0 = process.cpuUsage();
    let batch: Promise<unknown>[] = [];
    for (let i = c * chunk; i < (c + 1) * chunk; i++) {
      batch.push(write(i));
      if (batch.length >= 100) {
        await Promise.all(batch);
        batch = [];
      }
    }
    await Promise.all(batch);
    const cpu = process.cpuUsage(cpu0);
    usPerWrite.push((cpu.user + cpu.system) / chunk);
  }
  return usPerWrite;
}

const line = (name: string, us: number[]) =>
  out(
    `${name}: ${us.map((u) => u.toFixed(1)).join(" | ")} us CPU per write, by tenth ` +
      `(last/first tenth ${((us.at(-1) ?? 0) / (us[0] ?? 1)).toFixed(2)}x)`,
  );

async function main(): Promise<void> {
  const state = new SqliteStateStore({ path: ":memory:" });
  const at = "2026-01-01T00:00:00.000Z";
  line(
    "state store, 250,000 records",
    await tenths(250_000, (i) =>
      state.transact([
        {
          op: "put",
          record: { key: `r${i}`, kind: "bench", updatedAt: at, data: { i } },
          expectedVersion: 0,
        },
      ]),
    ),
  );
  await state.close();

  const objects = new SqliteObjectStore({ path: ":memory:" });
  const body = Buffer.alloc(400, 97);
  line(
    "object store, 300,000 objects of 400 bytes (each with a read)",
    await tenths(300_000, async (i) => {
      await objects.put(`o/${i}.json`, Buffer.from(body));
      await objects.get(`o/${Math.floor(i * 0.7)}.json`);
    }),
  );
  await objects.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`store-growth failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
