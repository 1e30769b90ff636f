import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type StoredEvent, upcastEvent } from "../../../shared/domain/events.ts";
import { reduceTaskView, type TaskView } from "../../../shared/domain/task-view.ts";
import { ValidationError } from "../../../shared/kernel/errors.ts";

/**
 * Saved event logs of every schema version ever written. The files are append-only: a new schema
 * version adds a folder and an upcaster, and these logs must still replay to the same views.
 */
const root = join(import.meta.dirname, "../../fixtures/events");

describe("historical event corpus", () => {
  for (const version of readdirSync(root)) {
    for (const file of readdirSync(join(root, version))) {
      it(`${version}/${file} still reads and replays to the views recorded with it`, () => {
        const saved = JSON.parse(readFileSync(join(root, version, file), "utf8")) as {
          events: (StoredEvent & Record<string, unknown>)[];
          views: Record<string, TaskView>;
        };
        const views = new Map<string, TaskView>();
        for (const raw of saved.events) {
          const { streamId, seq, recordedAt, ...event } = raw;
          const stored: StoredEvent = { ...upcastEvent(event), streamId, seq, recordedAt };
          const next = reduceTaskView(views.get(streamId), stored);
          if (next) views.set(streamId, next);
        }
        expect(Object.fromEntries(views)).toEqual(saved.views);
      });
    }
  }

  it("refuses an event of a schema version this build does not know", () => {
    expect(() => upcastEvent({ v: 99, type: "TaskCreated" })).toThrow(ValidationError);
    expect(() => upcastEvent({ v: 99, type: "TaskCreated" })).toThrow(/v: 99/);
  });
});
