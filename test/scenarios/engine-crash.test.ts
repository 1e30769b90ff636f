import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import type { EngineSettings, FaultPoint } from "../../shared/engine/context.ts";
import { CrashAt, Harness } from "./engine-harness.ts";

/**
 * A crash injected after each kind of step: the process "dies" at the first hit of the point (and
 * every later hit, as a dead process does nothing more), then a new process opens the same data
 * folder and the watchdog re-drives what stopped. The run must end exactly as a run without a crash.
 */
type Outcome = { statuses: string[]; output: string | undefined };

/** How the request ended, driven to its end (Harness.runToEnd). */
async function outcomeAtEnd(h: Harness, rootId: string): Promise<Outcome> {
  await h.runToEnd(rootId);
  const tree = await h.tree(rootId);
  return {
    statuses: [...tree.values()].map((v) => `${v.title}:${v.status}`).sort(),
    output: (await h.engine.result(rootId)).output,
  };
}

/** Every delivery is attempted once: what a crash interrupts is lost, as in a dead process. */
const crashSetup = (settings?: Partial<EngineSettings>) => ({
  script,
  assistants: ASSISTANTS,
  bus: { maxAttempts: 1 },
  ...(settings ? { settings } : {}),
});

/** Submits `request` on a process that dies at `crash`, then opens a new one on the same folder. */
async function crashAndRestart(h: Harness, request: string, crash: CrashAt): Promise<string> {
  await h.restart(); // re-open with the fault armed (assistants are registered already)
  await h.open(crash);
  const { rootTaskId } = await h.submit(request);
  await h.idle();
  expect(crash.fired).toBe(true);
  await h.restart(); // a new process, no faults
  return rootTaskId;
}

const CRASHES: [FaultPoint, string, Partial<EngineSettings>?][] = [
  ["after-llm", "plan"],
  ["after-write", "plan"],
  ["after-write", "materialise"],
  ["after-record", "TaskCreated"],
  ["before-publish", "TASK_READY"],
  ["after-record", "TaskStarted"],
  ["before-publish", "TURN_REQUESTED", { turnStepMs: 0 }], // each turn hands the next one on
  ["after-llm", "turn"],
  ["after-write", "turn"],
  ["after-record", "UserInteractionRequested"],
  ["after-write", "complete"],
  ["after-record", "TaskCompleted"],
  ["before-publish", "RESOURCE_PUT"],
  ["after-llm", "evaluate"],
];

describe("a crash after any kind of step resumes to the same result", () => {
  let h: Harness;
  afterEach(() => h?.close());

  let expected: Outcome;
  beforeAll(async () => {
    const reference = await Harness.create({ script, assistants: ASSISTANTS });
    const { rootTaskId } = await reference.submit(REQUEST);
    expected = await outcomeAtEnd(reference, rootTaskId);
    await reference.close();
  });

  it("the run without a crash ends with every task done (the reference)", () => {
    expect(expected.statuses).toHaveLength(8);
    expect(expected.statuses.every((s) => s.endsWith(":done"))).toBe(true);
    expect(expected.output).toMatch(/Logistics/);
  });

  for (const [point, step, settings] of CRASHES)
    it(`crash ${point} ${step}`, async () => {
      h = await Harness.create(crashSetup(settings));
      const rootTaskId = await crashAndRestart(h, REQUEST, new CrashAt(point, step));
      expect(await outcomeAtEnd(h, rootTaskId)).toEqual(expected);
    });
});

/**
 * A request of one task: its plan step runs the leaf itself (no ready command is sent for it), so
 * a crash anywhere in the leaf is a crash of the plan step, and what the restart drives again
 * (the plan delivered again, the watchdog) must run the leaf on, once.
 */
const ONE_TASK_REQUEST = "What is 1200 EUR split between 12 people?";
const ONE_TASK_CRASHES: [FaultPoint, string][] = [
  ["after-write", "materialise"],
  ["after-record", "TaskCreated"],
  ["after-record", "TaskStarted"],
  ["after-llm", "turn"],
  ["after-write", "turn"],
  ["after-write", "complete"],
  ["after-record", "TaskCompleted"],
];

describe("a crash in a request of one task, whose leaf runs in its plan step, resumes to the same result", () => {
  let h: Harness;
  afterEach(() => h?.close());

  let expected: Outcome;
  beforeAll(async () => {
    const reference = await Harness.create({ script, assistants: ASSISTANTS });
    const sent: string[] = [];
    reference.rt.bus.subscribe({
      name: "count-ready",
      pattern: { "detail-type": ["TASK_READY"] },
      handler: async (e) => void sent.push(String(e.detail.taskId)),
    });
    const { rootTaskId } = await reference.submit(ONE_TASK_REQUEST);
    expected = await outcomeAtEnd(reference, rootTaskId);
    expect(sent).toEqual([]); // the plan step ran it: no ready command
    await reference.close();
  });

  it("the run without a crash is one task, done, with the figure", () => {
    expect(expected.statuses).toHaveLength(1);
    expect(expected.statuses[0]).toMatch(/:done$/);
    expect(expected.output).toMatch(/100/);
  });

  for (const [point, step] of ONE_TASK_CRASHES)
    it(`crash ${point} ${step}`, async () => {
      h = await Harness.create(crashSetup());
      const rootTaskId = await crashAndRestart(h, ONE_TASK_REQUEST, new CrashAt(point, step));
      expect(await outcomeAtEnd(h, rootTaskId)).toEqual(expected);
    });
});
