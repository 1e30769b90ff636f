// Preloaded into a bench's server (`--import`): every 10 s, one line of JSON with the process's
// memory as V8 and Node see it (heap used and total, external, array buffers, RSS) appended to
// $ARBOR_BENCH_MEMORY_FILE, so that the bench can tell a growing JS heap from native memory
// (SQLite's page caches, a worker thread's heap, malloc) without pausing the server as a heap
// snapshot does.
import { appendFileSync } from "node:fs";
import { getHeapStatistics } from "node:v8";

const file = process.env.ARBOR_BENCH_MEMORY_FILE;
if (file) {
  const started = performance.now();
  setInterval(() => {
    const m = process.memoryUsage();
    const h = getHeapStatistics();
    const line = {
      atS: (performance.now() - started) / 1000,
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
      mallocedMemory: h.malloced_memory,
    };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  }, 10_000).unref();
}
