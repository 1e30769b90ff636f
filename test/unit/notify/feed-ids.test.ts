import { RequestMalformedError } from "@a2a-js/sdk/errors";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseStreamEventId } from "../../../shared/channels/a2a/a2a-streams.ts";
import { feedCopy, feedOrder, rootTaskOf } from "../../../shared/notify/feed.ts";
import { taskCreated, taskUrn } from "../../fixtures/event-builders.ts";

describe("the ids of a request's feed and of its streams", () => {
  it("finds the request's root task of any task of its tree", () => {
    const root = taskUrn("r");
    expect(rootTaskOf(root)).toBe(root);
    expect(rootTaskOf(taskUrn("r", "a", "b"))).toBe(root);
  });

  it("copies an event under an id derived from the original's: the same copy for every copier", () => {
    const root = taskUrn("r");
    const event = {
      ...taskCreated(taskUrn("r", "a")),
      streamId: taskUrn("r", "a"),
      seq: 1,
      recordedAt: "2026-01-01T00:00:00.000Z",
    };
    const a = feedCopy(root, event);
    expect(a).toEqual(feedCopy(root, event));
    expect(a.id).not.toBe(event.id);
    expect(a).not.toHaveProperty("streamId");
    expect(feedCopy(taskUrn("other"), event).id).not.toBe(a.id);
  });

  it("orders by time, then task, then seq; within one instant, endings last and deepest first", () => {
    const e = (at: string, streamId: string, seq: number) =>
      ({ ...taskCreated(taskUrn("r")), at, streamId, seq, recordedAt: at }) as Parameters<
        typeof feedOrder
      >[0];
    const t = "2026-01-01T00:00:00.000Z";
    const later = "2026-01-01T00:00:00.001Z";
    expect(
      [e(later, "a", 1), e(t, "b", 2), e(t, "b", 1), e(t, "a", 9)]
        .sort(feedOrder)
        .map((x) => `${x.streamId}${x.seq}`),
    ).toEqual(["a9", "b1", "b2", "a1"]);
    // One instant: the parent created before its child, the child ending before the parent.
    const parent = taskUrn("r");
    const kid = taskUrn("r", "k");
    const at = (type: "TaskCreated" | "TaskCompleted", task: string, seq: number) =>
      ({ ...taskCreated(taskUrn("r")), type, at: t, streamId: task, seq, recordedAt: t }) as Parameters<
        typeof feedOrder
      >[0];
    const instant = [
      at("TaskCompleted", parent, 3),
      at("TaskCompleted", kid, 3),
      at("TaskCreated", kid, 1),
      at("TaskCreated", parent, 1),
    ];
    expect(instant.sort(feedOrder).map((x) => [x.type, x.streamId === parent ? "parent" : "kid"])).toEqual([
      ["TaskCreated", "parent"],
      ["TaskCreated", "kid"],
      ["TaskCompleted", "kid"],
      ["TaskCompleted", "parent"],
    ]);
  });

  it("reads back every id a stream sends, and refuses anything else with a message that says what to send", () => {
    fc.assert(
      fc.property(fc.nat({ max: 10 ** 12 }), fc.option(fc.integer({ min: 1, max: 99 })), (seq, part) => {
        const id = part === null ? String(seq) : `${seq}.${part}`;
        expect(parseStreamEventId(id)).toEqual({ seq, part: part ?? Number.POSITIVE_INFINITY });
      }),
    );
    for (const bad of ["", "x", "-1", "01", "1.0", "1.", "1.2.3", "1e3", " ", "12abc"])
      expect(() => parseStreamEventId(bad)).toThrow(RequestMalformedError);
    expect(() => parseStreamEventId("nope")).toThrow(
      /Last-Event-ID "nope" is not an id this stream sends: send the id/,
    );
  });
});
