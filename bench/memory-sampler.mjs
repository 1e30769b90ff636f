// Preloaded into a bench's server (`--import`; NODE_OPTIONS preloads run in worker threads too):
// every 10 s, one line of JSON per thread with its JS heap (used and total, and each space's size)
// and, from the main thread, the process's RSS, external and array buffer memory, appended to
// $ARBOR_BENCH_MEMORY_FILE. The bench can then tell a growing JS heap, on the main thread or on a
// worker (the vector index's), from native memory (SQLite's page caches, malloc), without pausing
// the server as a heap snapshot does.
import { appendFileSync } from "node:fs";
import { getHeapSpaceStatistics } from "node:v8";
import { isMainThread, threadId } from "node:worker_threads";

const file = process.env.ARBOR_BENCH_MEMORY_FILE;
if (file) {
  const started = performance.now();
  setInterval(() => {
    const m = process.memoryUsage();
    const line = {
      thread: isMainThread ? "main" : `worker ${threadId}`,
      atS: (performance.now() - started) / 1000,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      ...(isMainThread ? { rss: m.rss, external: m.external, arrayBuffers: m.arrayBuffers } : {}),
      // Each space's committed size (new_space: the young generation; old_space...), to tell the
      // live set from what V8 holds between collections.
      spaces: Object.fromEntries(getHeapSpaceStatistics().map((x) => [x.space_name, x.space_size])),
    };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  }, 10_000).unref();
}
