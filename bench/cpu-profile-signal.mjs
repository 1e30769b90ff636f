// Preloaded into a bench's server (`--import`): SIGTTIN starts a CPU profile of the main thread,
// the next SIGTTIN stops it and writes it to $ARBOR_BENCH_CPU_PROFILE_DIR/<pid>-<n>.cpuprofile (open it
// in Chrome DevTools' Performance tab, or read its nodes' self time). bench/burst.ts --cpu-prof
// sends the signals around each burst, so a profile holds the burst alone, not the history built
// before it.
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { join } from "node:path";

const dir = process.env.ARBOR_BENCH_CPU_PROFILE_DIR ?? ".";
const session = new Session();
session.connect();
let running = false;
let n = 0;
process.on("SIGTTIN", () => {
  if (!running) {
    running = true;
    session.post("Profiler.enable", () =>
      session.post("Profiler.setSamplingInterval", { interval: 500 }, () => session.post("Profiler.start")),
    );
    return;
  }
  running = false;
  session.post("Profiler.stop", (error, result) => {
    if (error) return process.stderr.write(`cpu profile: ${error.message}\n`);
    writeFileSync(join(dir, `${process.pid}-${++n}.cpuprofile`), JSON.stringify(result.profile));
  });
});
