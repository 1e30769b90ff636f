import { defineConfig } from "vitest/config";

// Two projects: `unit` needs nothing but Node; `integration` starts the local AWS peers
// (DynamoDB Local, s3rver, the EventBridge PutEvents peer) once in its global setup.
// Timeouts hold on a loaded machine (CI, or 2 cores shared with other work): a CDK synthesis or a
// child process can take ten times what it takes alone, and vitest's 5 s / 10 s defaults failed
// tests that pass. A test that truly hangs still fails, later.
export default defineConfig({
  test: {
    // Two files at a time. Vitest's default on two cores is one (cores - 1), which runs the suite
    // serially; most files wait on child processes, peers and disks rather than on a core, so a
    // second worker halves the run. The timeouts below are set for that contention.
    maxWorkers: 2,
    // Structured logs stay quiet in tests; set POWERTOOLS_LOG_LEVEL=DEBUG to see them.
    env: { POWERTOOLS_LOG_LEVEL: process.env.POWERTOOLS_LOG_LEVEL ?? "SILENT" },
    // In CI, also write a JSON report; .ci/run prints its totals as one summary line.
    ...(process.env.CI ? { reporters: ["default", "json"], outputFile: { json: ".ci/results.json" } } : {}),
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/**/*.test.ts", "policies/**/*.test.ts"],
          exclude: ["**/*.int.test.ts", "**/node_modules/**"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/**/*.int.test.ts"],
          globalSetup: ["test/peers/global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
