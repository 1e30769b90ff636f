// The thread a WalCheckpointer (wal-checkpointer.ts) checkpoints on: its own connection to the
// database, which copies the WAL's pages into the database file and fsyncs both, so that the
// connection serving requests never does (SQLite's automatic checkpoint runs inside the COMMIT
// that passes the WAL's threshold, on the event loop). Plain JavaScript and libsql only: nothing
// to compile, so the thread starts in milliseconds.
import { parentPort, workerData } from "node:worker_threads";
import Database from "libsql";

const { path, everyMs } = workerData;
const db = new Database(path);
// Waiting here holds no event loop that serves anyone: opening may wait for a writer a while.
db.exec("PRAGMA busy_timeout = 5000");
let timer;

function checkpoint() {
  try {
    // PASSIVE: copies what it can without waiting for the writer or readers, and fsyncs (the WAL
    // before, the database after). Cheap when nothing was committed since the last one.
    const row = db.prepare("PRAGMA wal_checkpoint(PASSIVE)").get();
    parentPort.postMessage({ op: "checkpointed", busy: row.busy, log: row.log, copied: row.checkpointed });
  } catch (error) {
    parentPort.postMessage({ op: "failed", message: error?.message ?? String(error) });
  }
  timer = setTimeout(checkpoint, everyMs);
}

parentPort.on("message", (message) => {
  if (message?.op !== "close") return;
  clearTimeout(timer);
  db.close();
  parentPort.close();
});
parentPort.postMessage({ op: "ready" });
timer = setTimeout(checkpoint, everyMs);
