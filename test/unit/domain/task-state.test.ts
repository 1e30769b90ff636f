import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { StoredEvent, TaskEvent } from "../../../shared/domain/events.ts";
import { nextStatus, TASK_STATUSES, type TaskStatus, transition } from "../../../shared/domain/task-state.ts";
import { projectTaskView, reduceTaskView } from "../../../shared/domain/task-view.ts";
import { InvalidTransitionError } from "../../../shared/kernel/errors.ts";
import {
  interactionRequested,
  interactionResponded,
  taskCanceled,
  taskCompleted,
  taskCreated,
  taskFailed,
  taskStarted,
  taskUrn,
} from "../../fixtures/event-builders.ts";

const EVENTS: TaskEvent["type"][] = [
  "TaskCreated",
  "TaskStarted",
  "UserInteractionRequested",
  "UserInteractionResponded",
  "TaskCompleted",
  "TaskFailed",
  "TaskCanceled",
];

// The whole table: every (state, event) pair the machine allows; everything else is refused.
const ALLOWED: Record<TaskStatus, Partial<Record<TaskEvent["type"], TaskStatus>>> = {
  open: { TaskStarted: "in_progress", TaskFailed: "failed", TaskCanceled: "canceled" },
  in_progress: {
    UserInteractionRequested: "awaiting_user",
    TaskCompleted: "done",
    TaskFailed: "failed",
    TaskCanceled: "canceled",
  },
  awaiting_user: { UserInteractionResponded: "in_progress", TaskFailed: "failed", TaskCanceled: "canceled" },
  done: {},
  failed: {},
  canceled: {},
};

describe("task state machine", () => {
  for (const from of TASK_STATUSES) {
    for (const event of EVENTS) {
      const to = ALLOWED[from][event];
      it(`${from} + ${event} -> ${to ?? "refused"}`, () => {
        if (to) expect(transition("t", from, event)).toBe(to);
        else expect(() => transition("t", from, event)).toThrow(InvalidTransitionError);
      });
    }
  }

  it("starts only with TaskCreated", () => {
    expect(nextStatus(undefined, "TaskCreated")).toBe("open");
    for (const e of EVENTS.filter((x) => x !== "TaskCreated"))
      expect(nextStatus(undefined, e)).toBeUndefined();
  });

  it("names the task, its state and the refused event", () => {
    expect(() => transition("cld:x", "done", "TaskStarted")).toThrow(
      "Task cld:x cannot take TaskStarted while done",
    );
  });
});

const t = taskUrn("view");
const ix = taskUrn("view", "ix");
const stored = (events: TaskEvent[]): StoredEvent[] =>
  events.map((e, i) => ({ ...e, streamId: t, seq: i + 1, recordedAt: e.at }));

describe("TaskView reducer", () => {
  const life = stored([
    taskCreated(t),
    taskStarted(t),
    interactionRequested(t, ix),
    interactionResponded(t, ix),
    taskCompleted(t, { summary: "all good" }),
  ]);

  it("follows a task through its life", () => {
    const views = life.map((_, i) => projectTaskView(life.slice(0, i + 1)));
    expect(views.map((v) => v?.status)).toEqual([
      "open",
      "in_progress",
      "awaiting_user",
      "in_progress",
      "done",
    ]);
    expect(views[2]?.pendingInteractionId).toBe(ix);
    expect(views[3]?.pendingInteractionId).toBeUndefined();
    expect(views[3]?.lastInteractionId).toBe(ix);
    expect(views[4]).toMatchObject({ summary: "all good", version: 5, createdBy: "user_ada" });
  });

  it("is idempotent: an event applied again changes nothing", () => {
    let view: ReturnType<typeof reduceTaskView>;
    for (const e of life) {
      view = reduceTaskView(view, e);
      expect(reduceTaskView(view, e)).toBe(view);
    }
  });

  it("ignores events of other tasks and resource events", () => {
    const view = projectTaskView(life.slice(0, 2));
    const other = { ...taskCompleted(taskUrn("other")), streamId: "x", seq: 3, recordedAt: "" };
    expect(reduceTaskView(view, other)).toBe(view);
  });

  it("refuses a stream that breaks the machine", () => {
    expect(() => projectTaskView(stored([taskCreated(t), taskCompleted(t)]))).toThrow(InvalidTransitionError);
    expect(() => projectTaskView(stored([taskStarted(t)]))).toThrow(InvalidTransitionError);
  });

  it("reaches the same view however often and in whatever order events are redelivered (property)", () => {
    const paths: TaskEvent[][] = [
      [taskCreated(t), taskCanceled(t)],
      [taskCreated(t), taskStarted(t), taskFailed(t)],
      [taskCreated(t), taskStarted(t), interactionRequested(t, ix), taskCanceled(t)],
      [
        taskCreated(t),
        taskStarted(t),
        interactionRequested(t, ix),
        interactionResponded(t, ix),
        taskCompleted(t),
      ],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.array(fc.nat(), { maxLength: 20 }), (path, picks) => {
        const events = stored(path);
        const expected = projectTaskView(events);
        // Deliver the log in order, with random earlier events delivered again in between.
        const delivered: StoredEvent[] = [];
        events.forEach((e, i) => {
          delivered.push(e);
          for (const p of picks.slice(i * 2, i * 2 + 2)) delivered.push(events[p % (i + 1)] as StoredEvent);
        });
        expect(projectTaskView(delivered)).toEqual(expected);
      }),
    );
  });
});
