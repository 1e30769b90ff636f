import { relative } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

// test/README.md says which tests are where: test/scenarios/ runs Arbor in the test's process,
// test/process/ runs it as child processes (the CLI, `arbor serve`).

/**
 * The files that take longest, longest first (measured on 2 cores). Started first, they do not
 * end the run alone on one worker while the other sits idle; the rest follow in vitest's order.
 * A file missing from this list only starts later: keep it roughly current, no test depends on it.
 */
const LONGEST_FIRST = [
  "test/unit/house/doc-blocks.test.ts",
  "test/process/serve-crash.test.ts",
  "test/process/console-browser.test.ts",
  "test/process/team-cli.test.ts",
  "test/process/remote-cli.test.ts",
  "test/process/keys-cli.test.ts",
  "test/process/cli-run.test.ts",
  "test/contract/vector-index-sqlite.test.ts",
  "test/process/tools-cli.test.ts",
  "test/process/serve-channels.test.ts",
  "test/process/attack-remote-tenant.test.ts",
  "test/scenarios/notify-isolation.test.ts",
  "test/process/serve-kill-ask-activity.test.ts",
  "test/process/slack-serve-crash.test.ts",
  "test/integration/chat-aws.int.test.ts",
  "test/contract/object-store-s3.int.test.ts",
  "test/unit/infra/engine-stack.test.ts",
  "test/unit/infra/tools.test.ts",
  "test/unit/infra/storage-stack.test.ts",
  "test/unit/infra/tool-function.test.ts",
  "test/unit/infra/ops.test.ts",
  "test/unit/infra/notify.test.ts",
  "test/unit/infra/api.test.ts",
  "test/unit/infra/team.test.ts",
  "test/unit/infra/chat.test.ts",
  "test/unit/infra/activities.test.ts",
];

/**
 * Unit files that must run alone in their own process (module isolation): they measure the process
 * (heap, RSS), set V8 flags, or read counters a module keeps for the whole process (open feed
 * follows) and expect only their own there. A new test file that changes process-wide state
 * (process.env, vi.mock, fake timers, a spy it does not restore, a global) or reads such a
 * counter belongs here too; the others run in the `unit` project, one process per worker.
 */
const ISOLATED = [
  "test/scenarios/memory-bounds.test.ts",
  "test/scenarios/outbound-guard.test.ts",
  // openFollows(): the feed follows open in the whole process.
  "test/unit/notify/feed-follow.test.ts",
  "test/scenarios/http-events.test.ts",
  "test/scenarios/http-events-backpressure.test.ts",
  "test/scenarios/a2a-streams.test.ts",
  "test/scenarios/stream-limits.test.ts",
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const i = LONGEST_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId));
      return i < 0 ? LONGEST_FIRST.length : i;
    };
    return sorted.sort((a, b) => rank(a) - rank(b)); // stable: the others keep vitest's order
  }
}

// Three projects: `unit` needs nothing but Node; `unit-isolated` is the few unit files that need a
// process of their own; `integration` starts the local AWS peers (DynamoDB Local, s3rver, the
// EventBridge PutEvents peer) once in its global setup.
// Timeouts hold on a loaded machine (CI, or 2 cores shared with other work): a CDK synthesis or a
// child process can take ten times what it takes alone, and vitest's 5 s / 10 s defaults failed
// tests that pass. A test that truly hangs still fails, later.
const timeouts = { testTimeout: 60_000, hookTimeout: 120_000 };
// Every test process's CDK syntheses write into one folder it removes at its end (the file says why).
const CDK_OUTDIR = "test/support/cdk-outdir.ts";
export default defineConfig({
  test: {
    // Two files at a time. Vitest's default on two cores is one (cores - 1), which runs the suite
    // serially; most files wait on child processes, peers and disks rather than on a core, so a
    // second worker halves the run. The timeouts below are set for that contention.
    maxWorkers: 2,
    sequence: { sequencer: LongestFirst },
    // Structured logs stay quiet in tests; set POWERTOOLS_LOG_LEVEL=DEBUG to see them.
    env: { POWERTOOLS_LOG_LEVEL: process.env.POWERTOOLS_LOG_LEVEL ?? "SILENT" },
    // In CI, also write a JSON report; .ci/run prints its totals as one summary line.
    ...(process.env.CI ? { reporters: ["default", "json"], outputFile: { json: ".ci/results.json" } } : {}),
    projects: [
      {
        test: {
          name: "unit",
          globalSetup: [CDK_OUTDIR],
          setupFiles: [CDK_OUTDIR],
          include: ["test/**/*.test.ts", "policies/**/*.test.ts"],
          exclude: ["**/*.int.test.ts", "**/node_modules/**", ...ISOLATED],
          // One process per worker for all its files, and the modules they import loaded once in
          // it, instead of a new process that loads them all again for every file (most of a small
          // file's time). Test files keep no state outside what they create (no env changes, no
          // module mocks, spies restored); the infra files share one synthesis per context
          // (test/fixtures/synth.ts).
          isolate: false,
          ...timeouts,
        },
      },
      {
        test: {
          name: "unit-isolated",
          globalSetup: [CDK_OUTDIR],
          setupFiles: [CDK_OUTDIR],
          include: ISOLATED,
          ...timeouts,
        },
      },
      {
        test: {
          name: "integration",
          setupFiles: [CDK_OUTDIR],
          include: ["test/**/*.int.test.ts"],
          globalSetup: [CDK_OUTDIR, "test/peers/global-setup.ts"],
          ...timeouts,
        },
      },
    ],
  },
});
