import type { TaskEvent } from "../../shared/domain/events.ts";
import { taskDepth } from "../../shared/domain/urn.ts";
import { type FaultInjector, type FaultPoint, SimulatedCrash } from "../../shared/engine/context.ts";
import type { Harness } from "./engine-harness.ts";

// A process that dies while a plan's TaskCreated batches, written at once (engine/steps/planner.ts),
// are under way: some committed, the others not (plan-batches-attacks.test.ts, and on DynamoDB
// engine-lagging.int.test.ts).

/** A process that dies once `dead` is set: every later fault point throws, as nothing more happens. */
export class Dies implements FaultInjector {
  dead = false;
  hit(point: FaultPoint, step: string): void {
    if (this.dead) throw new SimulatedCrash(point, step);
  }
}

/**
 * The TaskCreated batches of this process: the one `lost` picks never commits (the process dies
 * while it is under way), once every other batch of the plan has committed.
 */
export function loseBatch(hh: Harness, dies: Dies, lost: (events: readonly TaskEvent[]) => boolean) {
  const log = hh.rt.tasks;
  const recordMany = log.recordMany.bind(log);
  const others: Promise<unknown>[] = [];
  const seen = { lost: 0, committed: 0 };
  log.recordMany = async (events: readonly TaskEvent[]) => {
    if (dies.dead) throw new SimulatedCrash("after-record", "TaskCreated");
    if (!lost(events)) {
      const done = recordMany(events);
      others.push(done);
      const views = await done;
      seen.committed++;
      return views;
    }
    await new Promise((r) => setTimeout(r, 20)); // the others are under way meanwhile
    await Promise.allSettled(others);
    seen.lost++;
    dies.dead = true;
    throw new SimulatedCrash("after-record", "TaskCreated");
  };
  return seen;
}

/** The batch that holds the request's root task. */
export const isRootBatch = (events: readonly TaskEvent[]) =>
  events.some((e) => e.type === "TaskCreated" && taskDepth(e.payload.taskId) === 1);

/**
 * A request submitted to a process that dies as `lost`'s batch is under way (the others of its plan
 * committed), then a new process on the same data, with no faults: the plan's command is delivered
 * to it again. Answers the request's root task, and what the batches did in the process that died.
 */
export async function crashWhilePlanning(
  hh: Harness,
  lost: (events: readonly TaskEvent[]) => boolean,
  text = "survey every area",
): Promise<{ rootTaskId: string; seen: { lost: number; committed: number } }> {
  await hh.restart();
  const dies = new Dies();
  await hh.open(dies);
  const seen = loseBatch(hh, dies, lost);
  const { rootTaskId } = await hh.submit(text);
  await hh.idle();
  await hh.restart(); // a new process, no faults
  return { rootTaskId, seen };
}
