import { afterEach, describe, expect, it } from "vitest";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import { CrashAt, Harness, PERSON } from "./engine-harness.ts";

/**
 * A process killed while it held a claim (during a model call: between taking a leaf's turn, or a
 * parent's evaluation, and writing what the model said) leaves the claim behind. `arbor serve`
 * holds its data folder's lock, so a new process knows that whoever held it is gone: what the
 * crash interrupted moves on as soon as it is driven again (serve drives everything at start-up),
 * not once the claim has gone stale (5 minutes) and the watchdog has come round (10 by default).
 * The clock moves a second per round here: far below any claim's staleness.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("claims a killed process held, after a restart on its data folder", () => {
  for (const step of ["turn", "evaluate"]) {
    it(`are taken over at once: a crash during a model call (${step}) resumes without waiting`, async () => {
      const crash = new CrashAt("after-llm", step);
      h = await Harness.create({ script, assistants: ASSISTANTS, faults: crash, lockAs: "arbor serve" });
      const { rootTaskId } = await h.submit(REQUEST);
      for (let round = 0; round < 10 && !crash.fired; round++) {
        await h.idle();
        for (const p of await h.pending(rootTaskId)) {
          if (crash.fired) break; // the process is dead: nobody answers it
          await h.engine.respond(p.meta.id, { selectedOptionId: "approve" }, PERSON);
        }
      }
      expect(crash.fired).toBe(true);
      await h.restart(); // the same folder; a new process, which takes the folder's lock
      for (let round = 0; round < 10; round++) {
        h.advance(1000);
        await h.engine.watchdog(0); // what serve does at start-up
        await h.idle();
        const pending = await h.pending(rootTaskId);
        for (const p of pending) await h.engine.respond(p.meta.id, { selectedOptionId: "approve" }, PERSON);
        if (pending.length === 0 && (await h.rt.tasks.view(rootTaskId))?.status === "done") break;
      }
      expect((await h.rt.tasks.view(rootTaskId))?.status).toBe("done");
    });
  }
});
