import { afterEach, describe, expect, it } from "vitest";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import { type ChatSurfaces, ENDED_BY } from "../../shared/notify/chat/sync.ts";
import { getThread } from "../../shared/notify/chat/thread-record.ts";
import type { SlackThread, TeamsThread } from "../../shared/notify/chat/types.ts";
import { subKey } from "../../shared/notify/subscriptions.ts";
import { RecordingSurface } from "../fixtures/recording-surface.ts";
import { Harness, PERSON } from "./engine-harness.ts";
import { runThreadsToEnd, threadWorker } from "./thread-worker.ts";

/**
 * The thread sync end to end on the local engine (the offsite scenario: a tree of depth 3, one
 * risky call to approve), through a recording surface: one progress message kept up to date, the
 * question posted then updated with who answered what, the answer posted once; wake-ups twice, two
 * workers, failures (retryable, not), and a worker that dies mid-sync: nothing posted twice, except
 * in the one documented window (a post the platform took whose id was not recorded yet).
 */
const SLACK: SlackThread = {
  kind: "slack",
  id: "slack-T1-C1",
  tenant: "acme",
  team: "T1",
  channel: "C1",
};
const MINUTE = 60_000;

let h: Harness | undefined;
const offs: (() => void)[] = [];
afterEach(async () => {
  for (const off of offs.splice(0)) off();
  await h?.close();
  h = undefined;
});

/** A worker reconciling every wake-up twice (as a redelivered event would), kicking unless told not to. */
const worker = (
  w: Harness,
  surfaces: ChatSurfaces | (() => ChatSurfaces | undefined),
  holder: string,
  options: { kick?: boolean } = {},
) => threadWorker(w, surfaces, holder, offs, { ...options, reconciles: 2 });

/** What a thread must show once the request ended, whatever happened on the way. */
function expectFinished(surface: RecordingSurface<unknown>, options: { progressPosts?: number } = {}): void {
  const progress = surface.posts("progress");
  expect(progress).toHaveLength(options.progressPosts ?? 1);
  const progressId = progress.at(-1)?.id as string;
  expect(surface.messages.get(progressId)?.payload).toMatchObject({ kind: "progress", state: "completed" });
  const questions = surface.posts("question");
  expect(questions).toHaveLength(1);
  const q = surface.messages.get(questions[0]?.id as string)?.payload;
  expect(q).toMatchObject({ purpose: "confirm_risky_action", answered: { by: PERSON.id, summary: "Allow" } });
  const answers = surface.posts("answer");
  expect(answers).toHaveLength(1);
  expect(answers[0]?.render.text).toMatch(/Logistics/);
}

describe("a Slack thread synced through its surface", () => {
  it("one progress message kept up to date, the question posted then answered, the answer once", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const notify = worker(h, { slack: surface }, "w1");
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, SLACK);
    await runThreadsToEnd(h, rootTaskId, [notify]);
    expectFinished(surface);
    // The progress message moved with the tree: updated, showing tasks in progress with their assistants.
    const progressId = surface.posts("progress")[0]?.id as string;
    const updates = surface.sent.filter((s) => s.op === "update" && s.id === progressId);
    expect(updates.length).toBeGreaterThan(3);
    const shown = updates.flatMap((u) => u.render.payload.tasks as string[]);
    expect(shown.some((t) => /Invite the team \[in_progress\] Communications/.test(t))).toBe(true);
    expect(shown.some((t) => /^ {4}Shortlist venues \[done\] Event planner/.test(t))).toBe(true);
    // No thread of its own (a slash command's): the progress message heads it, every later call knows it.
    expect(surface.sent[0]?.context.threadHead).toBeUndefined();
    expect(surface.sent.slice(1).every((s) => s.context.threadHead === progressId)).toBe(true);
    const thread = await getThread(h.engine.deps.state, subKey(rootTaskId, SLACK.id));
    expect(thread?.status).toBe("done");
    expect(thread?.data).toMatchObject({
      progress: progressId,
      threadHead: progressId,
      answer: expect.any(String),
    });
    expect(thread?.data.lease).toBeUndefined();
    expect((await notify.deliveries("delivered")).items.length).toBeGreaterThan(3);
    expect((await notify.deliveries("dead")).items).toEqual([]);
  });

  it("deliveries piled up for one thread: one run brings it up to date, none left waiting on a busy thread", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    // Reconciles on every wake-up but attempts nothing: the deliveries pile up, as on a restart.
    const notify = worker(h, { slack: surface }, "w1", { kick: false });
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, SLACK);
    await h.idle();
    const piled = (await notify.deliveries("pending")).items.length;
    expect(piled).toBeGreaterThan(2);
    await notify.runDue();
    // One thread's deliveries go one after another: the first applies the newest snapshot, the
    // others find it applied. Nothing is left to retry because the thread was busy.
    expect((await notify.deliveries("pending")).items).toEqual([]);
    expect((await notify.deliveries("sending")).items).toEqual([]);
    expect((await notify.deliveries("delivered")).items).toHaveLength(piled);
    expect(surface.posts("progress")).toHaveLength(1);
    expect(surface.posts("question")).toHaveLength(1);
  });

  it("two workers on the same state: nothing posted twice", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const a = worker(h, { slack: surface }, "w1");
    const b = worker(h, { slack: surface }, "w2");
    const { rootTaskId } = await h.submit(REQUEST);
    await a.subscribe(rootTaskId, { ...SLACK, threadTs: "1700000000.000100" });
    await runThreadsToEnd(h, rootTaskId, [a, b]);
    expectFinished(surface);
    // A thread of its own: no head is invented.
    expect(surface.sent.every((s) => s.context.threadHead === undefined)).toBe(true);
  });

  it("a retryable failure (rate limited), then success: each message once; Retry-After respected", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const notify = worker(h, { slack: surface }, "w1");
    surface.failures.push({ retryable: true, retryAfterMs: 30 * MINUTE });
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, SLACK);
    await h.idle();
    await notify.runDue();
    expect(surface.sent).toEqual([]);
    const limited = (await notify.deliveries("pending")).items.filter((d) =>
      /ratelimited/.test(d.data.lastError ?? ""),
    );
    expect(limited).toHaveLength(1);
    expect(Date.parse(limited[0]?.data.nextAttemptAt ?? "")).toBe(h.now + 30 * MINUTE);
    // The rate limit holds the thread: its later deliveries wait too, then the thread catches up.
    h.advance(10 * MINUTE);
    await notify.runDue();
    expect(surface.sent).toEqual([]);
    h.advance(20 * MINUTE);
    await notify.runDue();
    expect(surface.posts("question")).toHaveLength(1);
    await runThreadsToEnd(h, rootTaskId, [notify]);
    expectFinished(surface);
  });

  it("a failure that is not retryable: that delivery dead at once, listed with the dead ones", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const notify = worker(h, { slack: surface }, "w1");
    surface.failures.push({ retryable: false });
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, SLACK);
    await h.idle();
    await notify.runDue();
    const dead = (await notify.deliveries("dead")).items;
    expect(dead).toHaveLength(1);
    expect(dead[0]?.data).toMatchObject({
      channel: "slack",
      seq: 1,
      attempts: 1,
      lastError: "channel_not_found",
    });
    // That delivery is over; the thread's later ones (the platform answering again) bring it up to date.
    expect(surface.posts("progress")).toHaveLength(1);
  });

  it("no surface for the channel: retried, then dead, saying what to configure", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const notify = worker(h, () => undefined, "w1");
    const { rootTaskId } = await h.submit(REQUEST);
    const teams: TeamsThread = {
      kind: "teams",
      id: "teams-19-abc",
      tenant: "acme",
      serviceUrl: "https://smba.trafficmanager.net/emea/",
      conversationId: "19:abc@thread.tacv2",
      aadTenantId: "aad-1",
    };
    await notify.subscribe(rootTaskId, teams);
    await h.idle();
    for (let i = 0; i < 30 && (await notify.deliveries("dead")).items.length === 0; i++) {
      await notify.runDue();
      h.advance(10 * MINUTE);
    }
    const dead = (await notify.deliveries("dead")).items;
    expect(dead.length).toBeGreaterThan(0);
    expect(dead[0]?.data.attempts).toBeGreaterThan(1);
    expect(dead[0]?.data.lastError).toMatch(/no teams surface .*configure Teams in the chat settings/);
  });

  it("a request canceled while its question waits: the question shows it ended unanswered, then the reason", async () => {
    h = await Harness.create({ script, assistants: ASSISTANTS });
    const surface = new RecordingSurface<SlackThread>("slack");
    const notify = worker(h, { slack: surface }, "w1");
    const { rootTaskId } = await h.submit(REQUEST, "lazy"); // the plan waits for its approval
    await notify.subscribe(rootTaskId, SLACK);
    await h.idle();
    await notify.runDue();
    const [question] = surface.posts("question");
    expect(question?.render.payload).toMatchObject({ purpose: "approve_plan" });
    await h.engine.cancel(rootTaskId, PERSON, "not now");
    await h.idle();
    await notify.runDue();
    expect(surface.messages.get(question?.id as string)?.payload).toMatchObject({
      answered: { by: ENDED_BY, summary: "not answered: the request canceled" },
    });
    const answers = surface.posts("answer");
    expect(answers).toHaveLength(1);
    expect(answers[0]?.render.payload).toMatchObject({ state: "canceled" });
    expect(answers[0]?.render.text).toMatch(/not now/);
  });

  for (const [what, dieOn, progressPosts] of [
    ["while updating a question (its message recorded): nothing posted twice", "update-question", 1],
    [
      "right after the platform took the first post (the one window): only that message twice",
      "post-progress",
      2,
    ],
  ] as const)
    it(`a worker dies mid-sync ${what}`, async () => {
      const w = await Harness.create({ script, assistants: ASSISTANTS });
      h = w;
      const surface = new RecordingSurface<SlackThread>("slack");
      surface.dieOn = (op, render) =>
        dieOn === "post-progress"
          ? op === "post" && render.payload.kind === "progress"
          : op === "update" && render.payload.kind === "question";
      const first = worker(w, { slack: surface }, "w1", { kick: false });
      const { rootTaskId } = await w.submit(REQUEST);
      await first.subscribe(rootTaskId, SLACK);
      // The first worker runs until it dies (its attempt never returns: a SIGKILL).
      for (let round = 0; round < 40 && !surface.died; round++) {
        await w.idle();
        void first.runDue().catch(() => undefined); // a dead process reports nothing
        await new Promise((r) => setTimeout(r, 50));
        if (surface.died) break;
        for (const p of await w.pending(rootTaskId))
          await w.engine.respond(p.meta.id, { selectedOptionId: "approve" }, PERSON);
      }
      expect(surface.died).toBe(true);
      offs.splice(0); // the dead worker's bus goes with its process
      // A new process on the same data folder, and a worker in it, once the dead one's leases ran out.
      await w.restart();
      w.advance(5 * MINUTE);
      const second = worker(w, { slack: surface }, "w2");
      await second.sweep();
      await runThreadsToEnd(w, rootTaskId, [second]);
      expectFinished(surface, { progressPosts });
    });
});
