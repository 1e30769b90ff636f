import { describe, expect, it } from "vitest";
import { type ReplayedTasks, replayCheck } from "../../../../cli/lib/replay.ts";
import type { TaskView } from "../../../../shared/domain/task-view.ts";

/**
 * `arbor replay` beside a running `arbor serve`: a task written between the replay's reads differs
 * for a moment and is not a difference; a view that disagrees with its log for good is reported.
 */
const view = (taskId: string, status: TaskView["status"]) => ({ taskId, status }) as unknown as TaskView;

describe("arbor replay's check", () => {
  it("does not report a task that moved on while it read, and reports one whose view and log disagree", async () => {
    // t1 was written after the log was read: its stored view is ahead, and its stream says the same.
    // t2's stored view says done while its log says in_progress, however often it is read.
    const tasks: ReplayedTasks = {
      replay: async () =>
        new Map([
          ["t1", view("t1", "in_progress")],
          ["t2", view("t2", "in_progress")],
          ["t3", view("t3", "done")],
        ]),
      replayOne: async (id) => (id === "t1" ? view("t1", "done") : view(id, "in_progress")),
      view: async (id) => view(id, "done"),
    };
    expect(await replayCheck(tasks, { pause: async () => {} })).toEqual({ rebuilt: 3, differ: ["t2"] });
  });

  it("reads a log with many real differences without waiting long for each", async () => {
    const ids = Array.from({ length: 500 }, (_, i) => `t${i}`);
    let pauses = 0;
    const tasks: ReplayedTasks = {
      replay: async () => new Map(ids.map((id) => [id, view(id, "in_progress")])),
      replayOne: async (id) => view(id, "in_progress"),
      view: async (id) => view(id, "done"),
    };
    const pause = async () => {
      pauses++;
      await new Promise((done) => setTimeout(done, 5));
    };
    const started = Date.now();
    const { differ } = await replayCheck(tasks, { pause, waitMs: 200 });
    expect(differ).toHaveLength(500);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(pauses).toBeLessThan(100);
  });
});
