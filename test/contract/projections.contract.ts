import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConflictError, ValidationError } from "../../shared/kernel/errors.ts";
import type { LoggedEvent, StateStore } from "../../shared/ports/state-store.ts";
import { advanceProjection, getProjection, saveProjection } from "../../shared/store/projections.ts";
import { resourcePut, taskCreated, taskStarted, taskUrn } from "../fixtures/event-builders.ts";
import type { StateStoreFixture } from "./state-store.contract.ts";

type Counts = Record<string, number>;
const countByType = (counts: Counts, e: LoggedEvent): Counts => ({
  ...counts,
  [e.type]: (counts[e.type] ?? 0) + 1,
});

/** Projections of the global log (shared/store/projections.ts) over one StateStore adapter. */
export function projectionsContract(name: string, setup: () => Promise<StateStoreFixture>): void {
  describe(`projections of the global log: ${name}`, () => {
    let fx: StateStoreFixture;
    let store: StateStore;
    beforeEach(async () => {
      fx = await setup();
      store = fx.store;
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    /** Advances until nothing is left; the events applied. */
    const drain = async (projection: string, limit = 2) => {
      fx.settleIndexes?.();
      let applied = 0;
      for (;;) {
        const step = await advanceProjection(store, projection, {} as Counts, countByType, { limit });
        if (step.applied === 0) return { applied, projection: step.projection };
        applied += step.applied;
      }
    };

    it("folds the log page by page, keeps where it read to, and goes on from there", async () => {
      const [a, b] = [taskUrn("proj-a"), taskUrn("proj-b")];
      await store.append(a, [taskCreated(a), taskStarted(a)], 0);
      await store.append(b, [taskCreated(b), resourcePut(b), resourcePut(b)], 0);
      const first = await drain("events-by-type");
      expect(first.applied).toBe(5);
      expect(first.projection.state).toEqual({ TaskCreated: 2, TaskStarted: 1, RESOURCE_PUT: 2 });
      // As read again (another process, after a restart): where it stopped.
      const saved = await getProjection(store, "events-by-type", {} as Counts);
      expect(saved).toEqual(first.projection);
      await store.append(b, [taskStarted(b)], 3);
      const more = await drain("events-by-type");
      expect(more.applied).toBe(1);
      expect(more.projection.state).toEqual({ TaskCreated: 2, TaskStarted: 2, RESOURCE_PUT: 2 });
      // Another projection reads the log from its start, on its own.
      expect((await drain("others", 100)).projection.state).toEqual(more.projection.state);
    });

    it("of two workers advancing from the same point, the second's save conflicts and is not kept", async () => {
      const t = taskUrn("proj-race");
      await store.append(t, [taskCreated(t)], 0);
      fx.settleIndexes?.();
      const one = await getProjection(store, "raced", {} as Counts);
      const two = await getProjection(store, "raced", {} as Counts);
      await saveProjection(store, { ...one, state: { won: 1 } });
      await expect(saveProjection(store, { ...two, state: { lost: 1 } })).rejects.toBeInstanceOf(
        ConflictError,
      );
      expect((await getProjection(store, "raced", {} as Counts)).state).toEqual({ won: 1 });
    });

    it("refuses a name that is not a plain name, writing nothing", async () => {
      for (const bad of ["", "Upper", "-lead", "a/b", "x".repeat(65)])
        await expect(getProjection(store, bad, {})).rejects.toBeInstanceOf(ValidationError);
    });
  });
}
