import { afterEach, describe, expect, it } from "vitest";
import { withMeta } from "../../shared/domain/resources.ts";
import {
  readState,
  STATE_NOTE_VALUE_CHARS,
  stateNote,
  writeState,
} from "../../shared/engine/turn/activity-state.ts";
import { parseOutputPath } from "../../shared/tools/activities/activity-paths.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST } from "./scenarios.ts";

/** No lone surrogate (half a character outside the BMP). */
const wellFormed = (s: string) =>
  !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/**
 * A task's state as its worst writers fill it: paths that name an object's own properties, values
 * of characters outside the BMP, two writes of one path at once. Each path is its own entry, the
 * note shown to the model is always whole text, and the state is never the prototype of anything.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const TASK = withMeta({
  type: "plan.Task",
  name: "t",
  parent: withMeta({
    type: "common.Conversation",
    name: "c",
    parent: withMeta({ type: "common.Tenant", name: "acme" }).id,
  }).id,
}).id;
const source = { tool: "compare_threshold", callId: "c1", turn: 1 };

describe("a task's state under hostile writes", () => {
  it("paths named like object internals are plain entries, and pollute nothing", async () => {
    h = await Harness.create({ script: () => ({ content: "ok" }), assistants: GENERALIST });
    const deps = h.engine.deps;
    const paths = ["state.__proto__", "state.constructor", "state.prototype", "state.__proto__.polluted"];
    for (const raw of [paths.join(" || "), "state.__proto__"]) expect(parseOutputPath(raw).ok).toBe(true);
    for (const [i, path] of paths.entries())
      await writeState(deps, { taskId: TASK, path, value: { i }, source });
    const state = await readState(deps, TASK);
    expect(state.map((e) => [e.path, e.value])).toEqual(
      [...paths].sort((a, b) => a.localeCompare(b)).map((p) => [p, { i: paths.indexOf(p) }]),
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(await stateNote(deps, TASK)).toContain('- state.__proto__ = {"i":0}');
  });

  it("a value of emoji cut for the note is cut between characters, never inside one", async () => {
    h = await Harness.create({ script: () => ({ content: "ok" }), assistants: GENERALIST });
    const deps = h.engine.deps;
    // As JSON the value starts with a quote: the cut at STATE_NOTE_VALUE_CHARS lands inside a pair.
    await writeState(deps, {
      taskId: TASK,
      path: "state.faces",
      value: "🙂".repeat(STATE_NOTE_VALUE_CHARS),
      source,
    });
    for (let i = 0; i < 60; i++)
      await writeState(deps, { taskId: TASK, path: `state.p${i}`, value: "😀".repeat(200), source });
    const note = await stateNote(deps, TASK);
    expect(note).toContain("more characters]");
    expect(note).toContain("[state cut to fit]");
    expect(wellFormed(note)).toBe(true);
  });

  it("two writes of one path at once leave one entry holding one of the two values", async () => {
    h = await Harness.create({ script: () => ({ content: "ok" }), assistants: GENERALIST });
    const deps = h.engine.deps;
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        writeState(deps, {
          taskId: TASK,
          path: "state.hot",
          value: { i },
          source: { ...source, callId: `c${i}` },
        }),
      ),
    );
    const state = await readState(deps, TASK);
    expect(state).toHaveLength(1);
    const value = state[0]?.value as { i: number };
    expect(state[0]?.source.callId).toBe(`c${value.i}`);
  });
});
