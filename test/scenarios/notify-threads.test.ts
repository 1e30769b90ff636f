import { afterEach, describe, expect, it } from "vitest";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import { THREAD_TASKS, threadDigest, threadSnapshot } from "../../shared/notify/chat/snapshot.ts";
import type { SlackThread, TeamsThread, ThreadSnapshot } from "../../shared/notify/chat/types.ts";
import { DELIVERY_KIND, type DeliveryData } from "../../shared/notify/deliveries.ts";
import { NotifyService } from "../../shared/notify/service.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { NOTIFY_WAKE_PATTERNS, requestOfWakeup } from "../../shared/notify/wakeups.ts";
import { collectPages } from "../../shared/ports/state-store.ts";
import { Harness } from "./engine-harness.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * Chat threads on the notify path: a Slack thread or a Teams conversation is a subscription kind
 * with no URL; reconcile records one delivery per visible move of the tree (state, each task's
 * status and assistant, the waiting questions), its body the ThreadSnapshot. Here the wake-ups
 * only reconcile (no attempt is made): what is recorded is what a thread would be sent.
 */
const THREAD: SlackThread = {
  kind: "slack",
  id: "slack-T1-C1-1700000000.000100",
  tenant: "acme",
  team: "T1",
  channel: "C1",
  threadTs: "1700000000.000100",
};

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

/** The harness and a notify service whose only worker is "reconcile on every wake-up". */
async function world() {
  h = await Harness.create({ script, assistants: ASSISTANTS });
  const notify = new NotifyService({ deps: h.engine.deps, urls: notifyUrls() });
  const wakes: string[] = [];
  for (const [i, pattern] of NOTIFY_WAKE_PATTERNS.entries())
    h.rt.bus.subscribe({
      name: `wake-${i}`,
      pattern,
      handler: async (event) => {
        const root = requestOfWakeup(event);
        wakes.push(event["detail-type"]);
        // Every wake-up twice: the second finds the subscription told already.
        if (root) for (let n = 0; n < 2; n++) await notify.reconcile(root);
      },
    });
  return { h, notify, wakes };
}

async function recorded(w: Harness, rootTaskUrn: string): Promise<DeliveryData[]> {
  const all: DeliveryData[] = [];
  for (const status of ["pending", "sending", "delivered", "dead"])
    all.push(
      ...(
        await collectPages((cursor) =>
          w.engine.deps.state.byStatus<DeliveryData>(DELIVERY_KIND, status, {
            limit: 100,
            ...(cursor ? { cursor } : {}),
          }),
        )
      ).map((r) => r.data),
    );
  return all.filter((d) => d.rootTaskUrn === rootTaskUrn).sort((a, b) => a.seq - b.seq);
}

describe("a chat thread subscribed to a request", () => {
  it("is told every visible move once, with the thread's snapshot as the body", async () => {
    const { h, notify, wakes } = await world();
    const { rootTaskId } = await h.submit(REQUEST);
    await notify.subscribe(rootTaskId, THREAD);
    await h.runToEnd(rootTaskId);
    expect(wakes).toContain("TURN_REQUESTED");

    const deliveries = await recorded(h, rootTaskId);
    const snapshots = deliveries.map((d) => JSON.parse(d.body) as ThreadSnapshot);
    expect(deliveries.every((d) => d.channel === "slack" && d.url === `slack:${THREAD.id}`)).toBe(true);
    expect(deliveries.map((d) => d.seq)).toEqual(deliveries.map((_, i) => i + 1));
    // One delivery per visible move: no two in a row show the same.
    const digests = snapshots.map(threadDigest);
    for (let i = 1; i < digests.length; i++) expect(digests[i]).not.toBe(digests[i - 1]);
    expect(new Set(deliveries.map((d) => d.stateKey)).size).toBe(deliveries.length);

    // The tree moved through its tasks: each seen in progress with its assistant, then done.
    const last = snapshots.at(-1) as ThreadSnapshot;
    expect(last).toMatchObject({ state: "completed", rootTaskUrn: rootTaskId, truncated: false });
    expect(last.answer).toMatch(/Logistics/);
    expect(last.conversationUrn).toMatch(/^cld:common\.Tenant\.acme\/common\.Conversation\./);
    expect(last.tasks[0]).toMatchObject({ taskId: rootTaskId, depth: 0, status: "done" });
    expect(last.tasks.every((t) => t.status === "done")).toBe(true);
    expect(Math.max(...last.tasks.map((t) => t.depth))).toBe(2);
    expect(last.taskCount).toBe(last.tasks.length);
    const inviting = snapshots.flatMap((s) => s.tasks).filter((t) => t.title === "Invite the team");
    expect(inviting.map((t) => t.status)).toContain("in_progress");
    expect(inviting.at(-1)?.assistant).toBe("Communications");
    // The risky call's question was shown, waiting, with its options and binding.
    const asked = snapshots.find((s) => s.questions.length > 0);
    expect(asked?.state).toBe("input-required");
    expect(asked?.questions[0]).toMatchObject({
      kind: "confirm",
      purpose: "confirm_risky_action",
      binding: { tool: "send_email" },
    });
    expect(asked?.questions[0]?.options?.length).toBeGreaterThan(0);

    // Nothing more to tell: a later reconcile records nothing; the subscription is done.
    expect(await notify.reconcile(rootTaskId)).toEqual([]);
    expect((await notify.subscription(rootTaskId, THREAD.id))?.status).toBe("done");
  });

  it("the snapshot of a request not yet planned is working, with its root task open", async () => {
    const { h } = await world();
    const { rootTaskId } = await h.submit(REQUEST);
    const s = await threadSnapshot(h.engine.deps, rootTaskId);
    expect(s).toMatchObject({ state: "working", rootTaskUrn: rootTaskId, questions: [], taskCount: 1 });
    expect(s.tasks).toEqual([{ taskId: rootTaskId, depth: 0, title: REQUEST, status: "open" }]);
    await h.idle();
  });

  it("shows at most THREAD_TASKS tasks of a wide tree, breadth first, and says it is cut", async () => {
    // 1 + 6 + 36 tasks: more than a thread shows.
    const spec = {
      name: "Survey",
      purpose: "Collect every part",
      subtasks: Array.from({ length: 6 }, (_, i) => ({
        name: `area ${i + 1}`,
        purpose: `Cover area ${i + 1}`,
        subtasks: Array.from({ length: 6 }, (_, j) => ({
          name: `part ${i + 1}.${j + 1}`,
          purpose: "Report it",
        })),
      })),
    };
    const wide: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf(spec);
      if (isEvaluation(r)) return pass();
      return { content: "reported" };
    };
    h = await Harness.create({ script: wide, assistants: GENERALIST, settings: { electionThreshold: -1 } });
    const { rootTaskId } = await h.submit("Survey everything");
    await h.idle();
    const s = await threadSnapshot(h.engine.deps, rootTaskId);
    expect(s).toMatchObject({ state: "completed", taskCount: THREAD_TASKS, truncated: true });
    expect(s.tasks).toHaveLength(THREAD_TASKS);
    expect(s.tasks[0]).toMatchObject({ taskId: rootTaskId, depth: 0, assistant: "Generalist" });
    expect(s.tasks.map((t) => t.depth)).toEqual([0, ...Array(6).fill(1), ...Array(23).fill(2)]);
    expect(s.tasks.every((t) => t.status === "done")).toBe(true);
  });

  it("has no URL to check; a malformed thread is refused and nothing is written", async () => {
    const { h, notify } = await world();
    const { rootTaskId } = await h.submit(REQUEST);
    const teams: TeamsThread = {
      kind: "teams",
      id: "teams-19:abc",
      tenant: "acme",
      serviceUrl: "https://smba.trafficmanager.net/emea/",
      conversationId: "19:abc@thread.tacv2",
      aadTenantId: "00000000-0000-0000-0000-000000000001",
    };
    await notify.subscribe(rootTaskId, teams);
    await expect(
      notify.subscribe(rootTaskId, { ...THREAD, channel: "" } as SlackThread),
    ).rejects.toBeInstanceOf(ValidationError);
    expect((await notify.subscriptions(rootTaskId)).map((s) => s.data.subscription.kind)).toEqual(["teams"]);
    await h.idle();
  });
});
