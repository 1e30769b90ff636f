import { setTimeout as sleep } from "node:timers/promises";
import type { TaskView } from "../../shared/domain/task-view.ts";

/**
 * `arbor replay`'s check: every task view rebuilt from the event log, compared with the stored
 * one. It reads beside a running `arbor serve` (no lock), whose writes land between its reads: a
 * task that moved on meanwhile differs for a moment without anything being wrong. Such a task is
 * read again alone (its stream, then its view) until the two agree, a few times (5 s of waits in
 * all, then once each); only a task whose view and log still disagree is reported.
 */
export interface ReplayedTasks {
  replay(): Promise<Map<string, TaskView>>;
  replayOne(taskId: string): Promise<TaskView | undefined>;
  view(taskId: string): Promise<TaskView | undefined>;
}

export async function replayCheck(
  tasks: ReplayedTasks,
  options: { tries?: number; pause?: () => Promise<unknown>; waitMs?: number } = {},
): Promise<{ rebuilt: number; differ: string[] }> {
  const tries = options.tries ?? 20;
  const pause = options.pause ?? (() => sleep(100));
  const same = (a: TaskView | undefined, b: TaskView | undefined) => JSON.stringify(a) === JSON.stringify(b);
  const replayed = await tasks.replay();
  // The waits between reads, all tasks together: a log with many real differences is not read slowly.
  const waitUntil = Date.now() + (options.waitMs ?? 5000);
  const differ: string[] = [];
  for (const [taskId, view] of replayed) {
    if (same(view, await tasks.view(taskId))) continue;
    let settled = false;
    for (let i = 0; i < tries && !settled; i++) {
      if (Date.now() < waitUntil) await pause();
      else if (i > 0) break; // out of waiting: one more read, no more
      const rebuilt = await tasks.replayOne(taskId);
      settled = same(rebuilt, await tasks.view(taskId));
    }
    if (!settled) differ.push(taskId);
  }
  return { rebuilt: replayed.size, differ };
}
