import { Worker } from "node:worker_threads";
import { componentLogger } from "../../kernel/logger.ts";

/**
 * Checkpoints a SQLite database's WAL on a thread of its own (wal-checkpoint-worker.mjs), every
 * `everyMs`, so that the connection on the event loop never does.
 *
 * Why: SQLite checkpoints by itself inside the COMMIT that takes the WAL past 1,000 pages: it
 * copies those pages into the database file and fsyncs the WAL and the file, synchronously, on the
 * thread that commits. On `arbor serve` that is the event loop, and the bigger the database (the
 * pages a checkpoint writes lie further apart, and fewer are in the OS's cache), the longer it
 * holds every request: a burst of 200 requests took 3-4x longer to accept on a server with a few
 * thousand requests of history (issue 22), with fsyncs of up to 35 ms on the main thread.
 *
 * The owner moves its own automatic checkpoints to a far higher threshold (a backstop) only once
 * the thread has opened the database (`onReady`), and back to SQLite's default if the thread fails
 * or stops (`onStopped`): the WAL never goes unchecked. A PASSIVE checkpoint waits for nobody; while the writer keeps the WAL busy it copies
 * what it can, and SQLite starts the WAL from its beginning again at a commit after a checkpoint
 * that copied all of it, so the file stays about as large as a second of writes.
 */
export interface WalCheckpointerOptions {
  /** The database file (not :memory:). */
  path: string;
  /** How often the thread checkpoints; default 1,000 ms. */
  everyMs?: number;
  /** The thread has the database open: the owner may leave checkpoints to it. */
  onReady: () => void;
  /** The thread stopped or failed: the owner checkpoints by itself again. */
  onStopped: () => void;
}

export class WalCheckpointer {
  readonly #worker: Worker;
  readonly #log = componentLogger("wal-checkpointer");
  #stopped = false;
  #closing: Promise<void> | undefined;

  constructor(options: WalCheckpointerOptions) {
    const worker = new Worker(new URL("./wal-checkpoint-worker.mjs", import.meta.url), {
      workerData: { path: options.path, everyMs: options.everyMs ?? 1000 },
    });
    this.#worker = worker;
    // Not a reason to keep the process alive; close() ends it.
    worker.unref();
    const stopped = (why: string, error?: unknown) => {
      if (this.#stopped) return;
      this.#stopped = true;
      if (this.#closing === undefined)
        this.#log.warn("WAL checkpoints are back on the main thread", {
          why,
          ...(error ? { error: error as Error } : {}),
        });
      options.onStopped();
    };
    worker.on("message", (m: { op: string; message?: string }) => {
      if (m.op === "ready") {
        this.#log.info("WAL checkpoints run on their own thread", { path: options.path });
        options.onReady();
      } else if (m.op === "failed") {
        stopped(`a checkpoint failed: ${m.message}`);
        void worker.terminate();
      }
    });
    worker.on("error", (error) => stopped("the thread failed", error));
    worker.on("exit", (code) => stopped(`the thread exited (${code})`));
  }

  /** Stops the thread and closes its connection (before the owner closes its own). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#stopped
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          this.#worker.once("exit", () => resolve());
          this.#worker.ref(); // until it has closed its connection
          this.#worker.postMessage({ op: "close" });
        });
    return this.#closing;
  }
}
