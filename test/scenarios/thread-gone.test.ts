import { afterEach, describe, expect, it } from "vitest";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import type { ChatSurfaces } from "../../shared/notify/chat/sync.ts";
import type { SlackThread } from "../../shared/notify/chat/types.ts";
import { RecordingSurface } from "../fixtures/recording-surface.ts";
import { Harness } from "./engine-harness.ts";
import { runThreadsToEnd, threadWorker } from "./thread-worker.ts";

/**
 * A thread whose messages someone deleted in the chat (the progress message, a question's message):
 * an update the surface says is `gone` does not end the delivery (and every later one) dead. The
 * progress message is posted anew in the thread and kept up to date from then on; a deleted
 * question's message is not posted again (its answer is recorded; nothing waits on it).
 */
const SLACK: SlackThread = {
  kind: "slack",
  id: "slack-T1-C1",
  tenant: "acme",
  team: "T1",
  channel: "C1",
  threadTs: "1.000001",
};

let h: Harness | undefined;
const offs: (() => void)[] = [];
afterEach(async () => {
  for (const off of offs.splice(0)) off();
  await h?.close();
  h = undefined;
});

const worker = (w: Harness, surfaces: ChatSurfaces) => threadWorker(w, surfaces, "w1", offs);

describe("a thread whose messages were deleted in the chat", () => {
  it("the progress message deleted: posted anew, kept up to date, nothing ends dead", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const notify = worker(h, { slack: surface });
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, SLACK);
    await h.idle();
    await notify.runDue();
    const first = surface.posts("progress")[0]?.id as string;
    expect(first).toBeDefined();
    surface.messages.delete(first); // someone deleted it in the channel
    await runThreadsToEnd(h, rootTaskId, [notify]);
    expect((await notify.deliveries("dead")).items).toEqual([]);
    const progress = surface.posts("progress");
    expect(progress).toHaveLength(2);
    const again = progress[1]?.id as string;
    expect(surface.messages.get(again)?.payload).toMatchObject({ kind: "progress", state: "completed" });
    expect(surface.posts("answer")).toHaveLength(1);
  });

  it("a question's message deleted before it was answered: not posted again, the rest goes on", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const notify = worker(h, { slack: surface });
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, SLACK);
    await runThreadsToEnd(h, rootTaskId, [notify], () => {
      for (const q of surface.posts("question")) surface.messages.delete(q.id);
    });
    expect((await notify.deliveries("dead")).items).toEqual([]);
    expect(surface.posts("question")).toHaveLength(1);
    expect(surface.posts("progress")).toHaveLength(1);
    expect(surface.posts("answer")).toHaveLength(1);
  });
});
