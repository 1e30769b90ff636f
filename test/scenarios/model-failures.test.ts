import { afterEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ModelError, ThrottledError, UnavailableError } from "../../shared/kernel/errors.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, taskName } from "./scenarios.ts";

/**
 * What a model failure that remains after the adapter's own retries means for a task, below the
 * root as at it (shared/engine/model-calls.ts): unavailable or throttling, it is tried again in the
 * step until it has lasted `modelRetryMs`, then the task fails with the reason, and its parent's
 * evaluation (the model still down) fails the request the same way; a failure that mends within
 * the window is not seen by the task; any other error is left to the bus's retries, as before.
 */
const PLAN = {
  name: "Survey",
  purpose: "Survey the parts",
  subtasks: [{ name: "Count the parts", purpose: "Count them" }],
};
const planning: ScriptFunction = () => ({ toolCalls: [{ name: "create_plan", arguments: PLAN }] });

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("a model failure in a leaf's turn and in an evaluation", () => {
  it("lasting: the leaf fails with the reason, then its parent, and the request ends failed", async () => {
    let calls = 0;
    h = await Harness.create({
      assistants: GENERALIST,
      settings: { electionThreshold: -1, modelRetryMs: 300 },
      script: (r, i) => {
        if (isPlan(r)) return planning(r, i);
        calls++;
        throw new UnavailableError(
          "Could not reach the model server at http://models.internal/v1 (ECONNREFUSED)",
        );
      },
    });
    const { rootTaskId } = await h.submit("survey the parts");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    const leaf = tree.get("Count the parts");
    expect(leaf?.status).toBe("failed");
    expect(leaf?.failureReason).toMatch(
      /^The model could not take turn 1: Could not reach the model server .*\(failing for [\d.]+ s, \d+ attempt\(s\) in this step\)\. Once the model answers, send the request again\.$/,
    );
    const root = tree.get("Survey");
    expect(root?.status).toBe("failed");
    expect(root?.failureReason).toMatch(
      /^The model could not evaluate the subtasks: Could not reach the model server/,
    );
    // Tried more than once in the leaf's step; the evaluation, the model known down for the window, once.
    expect(calls).toBeGreaterThan(2);
    expect(h.rt.bus.deadLetters).toEqual([]);
    expect(await h.engine.modelStatus()).toMatchObject({ status: "unreachable", from: "calls" });
  });

  it("transient: throttled twice, then answered, and the task never knows", async () => {
    let failures = 0;
    h = await Harness.create({
      assistants: GENERALIST,
      settings: { electionThreshold: -1, modelRetryMs: 30_000 },
      script: (r, i) => {
        if (isPlan(r)) return planning(r, i);
        if (isEvaluation(r)) return pass("counted: 7");
        if (taskName(r) === "Count the parts" && failures < 2) {
          failures++;
          throw new ThrottledError("The model server asked to slow down; gave up after 4 attempt(s)");
        }
        return { content: "7 parts" };
      },
    });
    const { rootTaskId } = await h.submit("survey the parts");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect(tree.get("Count the parts")?.status).toBe("done");
    expect((await h.engine.result(rootTaskId)).output).toBe("counted: 7");
    expect(failures).toBe(2);
    expect(await h.engine.modelStatus()).toMatchObject({ status: "ok", from: "calls" });
  });

  it("any other error (an answer the engine cannot use) is left to the step's retries, as before: nothing fails the task", async () => {
    let calls = 0;
    h = await Harness.create({
      assistants: GENERALIST,
      settings: { electionThreshold: -1, modelRetryMs: 0 },
      script: (r, i) => {
        if (isPlan(r)) return planning(r, i);
        calls++;
        throw new ModelError("The model answered with a malformed tool call");
      },
    });
    const { rootTaskId } = await h.submit("survey the parts");
    await h.idle();
    const tree = await h.tree(rootTaskId);
    expect(tree.get("Count the parts")?.status).toBe("in_progress"); // the watchdog drives it again
    expect(tree.get("Survey")?.status).toBe("in_progress");
    expect(calls).toBe(1);
    // Not a sign of the model's reach: what is known stays what the plan's call found.
    expect(await h.engine.modelStatus()).toMatchObject({ status: "ok", from: "calls" });
  });
});
