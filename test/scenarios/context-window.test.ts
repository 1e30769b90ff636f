import { afterEach, describe, expect, it } from "vitest";
import { type FaultInjector, type FaultPoint, SimulatedCrash } from "../../shared/engine/context.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import {
  BUDGET,
  COUNTER,
  countingScript,
  newestCall,
  type Seen,
  settings,
} from "./context-window-fixture.ts";
import { Harness } from "./engine-harness.ts";

/**
 * A long inner loop stays within its token window: the scripted model asks for a tool 199 times,
 * then answers; every request it gets is counted with the engine's counter (the scripted model's
 * family: the estimate) and checked: within the budget, the task's prompt first, the newest turn
 * present, every tool result after its call.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("context windows of a long inner loop", () => {
  it("a 200-turn loop: every request within its budget, with the prompt, the newest turn and every pair", async () => {
    const seen: Seen = { requests: [], maxTokens: 0, problems: [] };
    h = await Harness.create({ script: countingScript(199, seen), assistants: COUNTER, settings });
    const { rootTaskId } = await h.submit("Count the words of 199 texts");
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toContain("counted 199 texts");
    expect(seen.requests).toHaveLength(200);
    expect(seen.problems).toEqual([]);
    expect(seen.maxTokens).toBeLessThanOrEqual(BUDGET);
    // The window did its work: later requests leave turns out, with one note, and stub old arguments.
    const last = seen.requests.at(-1) as LlmRequest;
    expect(last.messages[1]?.content).toMatch(/^\[Context note: \d+ earlier turns are left out to fit/);
    const omitted = /"omitted":"\d+ characters of arguments; read cld:\S+\/common\.Message\.[0-9a-f]+"/;
    expect(omitted.test(JSON.stringify(last.messages))).toBe(true);
    expect(last.messages.filter((m) => m.role === "assistant").length).toBeGreaterThan(5);
    // Every turn is still stored: the window leaves turns out of the request, not out of the record.
    const stored = await h.rt.resources.children(rootTaskId, "common.Message");
    expect(stored.filter((m) => /^turn-\d{4}$/.test(m.meta.name))).toHaveLength(199);
  }, 120_000);

  it("a crash right after a model call in the middle of the loop: the re-driven step sends the same window", async () => {
    const seen: Seen = { requests: [], maxTokens: 0, problems: [] };
    let calls = 0;
    const crash: FaultInjector & { fired: boolean } = {
      fired: false,
      hit(point: FaultPoint, step: string) {
        if (this.fired || (point === "after-llm" && step === "turn" && ++calls === 60)) {
          this.fired = true;
          throw new SimulatedCrash(point, step);
        }
      },
    };
    h = await Harness.create({
      script: countingScript(80, seen),
      assistants: COUNTER,
      settings,
      bus: { maxAttempts: 1 },
      faults: crash,
    });
    const { rootTaskId } = await h.submit("Count the words of 80 texts");
    await h.idle();
    expect(crash.fired).toBe(true);
    const before = seen.requests.length;
    const crashed = seen.requests.at(-1) as LlmRequest;
    expect(newestCall(crashed)).toBe(59);
    await h.restart(); // a new process, no faults
    for (let round = 0; round < 10 && (await h.rt.tasks.view(rootTaskId))?.status !== "done"; round++) {
      h.advance(10 * 60_000); // past the turn claim's staleness
      await h.engine.watchdog(60_000);
      await h.idle();
    }
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const redriven = seen.requests[before] as LlmRequest;
    expect(newestCall(redriven)).toBe(59);
    expect(redriven).toEqual(crashed);
    expect(crashed.messages[1]?.content).toMatch(/^\[Context note: /); // the window was cutting then
    expect(seen.problems).toEqual([]);
  }, 120_000);
});
