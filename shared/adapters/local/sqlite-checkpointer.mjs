// A worker thread that checkpoints one SQLite file's WAL (copies committed pages into the
// database file and fsyncs it), so that the thread writing to the database never does: see
// SqliteDatabase. Plain JavaScript, so the thread starts without a TypeScript loader.
import { parentPort, workerData } from "node:worker_threads";
import Database from "libsql";

const { path, intervalMs } = workerData;
const db = new Database(path);
db.exec("PRAGMA busy_timeout = 5000");

function checkpoint() {
  try {
    // PASSIVE: copies what it can without waiting for, or blocking, the writer and readers.
    db.exec("PRAGMA wal_checkpoint(PASSIVE)");
  } catch (e) {
    parentPort.postMessage({ error: e instanceof Error ? e.message : String(e) });
  }
}

const timer = setInterval(checkpoint, intervalMs);
parentPort.on("message", (message) => {
  if (message !== "close") return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
