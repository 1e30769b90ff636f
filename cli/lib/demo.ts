import { ulid } from "ulid";
import { type Actor, type EventOf, eventIdFor } from "../../shared/domain/events.ts";
import { type TaskSpec, withMeta } from "../../shared/domain/resources.ts";
import { parentUrn, tenantUrn, type Urn } from "../../shared/domain/urn.ts";
import { ArborError } from "../../shared/kernel/errors.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import type { LocalRuntime } from "../../shared/runtime/local/local.ts";
import { heading, note, printTaskTree } from "./render.ts";

/**
 * `arbor demo`: a scripted walk through Arbor's foundation on the local runtime. It writes a
 * conversation and a task tree of depth 3 as URN-addressed resources, subscribes every parent to
 * RESOURCE_PUT events under its own URN prefix, "runs" the leaves with canned answers (the planner
 * and the agents are not part of the foundation), lets completions climb the tree through the bus
 * with every event delivered twice, and finally rebuilds every task view from the event log.
 */
const PERSON: Actor = { id: "user_demo", kind: "human" };

const REQUEST = "Plan a two-day team offsite in Lisbon for 12 people";
const PLAN: TaskSpec = {
  name: "Plan the offsite",
  purpose: REQUEST,
  evaluation: "Venue, travel and agenda are settled within budget",
  subtasks: [
    {
      name: "Logistics",
      purpose: "Settle where the team stays and how it gets there",
      subtasks: [
        { name: "Shortlist venues", purpose: "Find three venues for 12 people in Lisbon" },
        { name: "Book travel", purpose: "Plan flights and transfers for everyone" },
      ],
    },
    {
      name: "Agenda",
      purpose: "Decide what the two days are for",
      subtasks: [
        { name: "Draft sessions", purpose: "Propose the working sessions" },
        { name: "Plan a team dinner", purpose: "Pick a restaurant for the first evening" },
      ],
    },
  ],
};
const CANNED: Record<string, string> = {
  "Shortlist venues": "LX Factory loft, Palácio Chiado, Village Underground: all hold 12, all free in May.",
  "Book travel": "Flights on Thursday morning, transfers by minibus; estimate 2,900 EUR.",
  "Draft sessions": "Day 1: roadmap review and retro. Day 2: two design workshops and a demo hour.",
  "Plan a team dinner": "Thursday 20:00 at a tasca in Alfama; table for 12 held.",
};

const taskEvent = <T extends EventOf<"TaskCreated" | "TaskStarted" | "TaskCompleted">["type"]>(
  type: T,
  payload: Extract<EventOf<"TaskCreated" | "TaskStarted" | "TaskCompleted">, { type: T }>["payload"],
  actor: Actor,
  id: string,
) => ({ id, v: 1 as const, at: new Date().toISOString(), actor, type, payload }) as EventOf<T>;

export async function runDemo(rt: LocalRuntime, write: (line: string) => void): Promise<void> {
  const started = performance.now();
  const tenant = tenantUrn(rt.tenant);
  write(heading(`Arbor foundation walkthrough (local mode, data in ${rt.dataDir})`));

  // 1. Resources: tenant, conversation, the person's message, and the planned task tree.
  await rt.resources.put({ meta: withMeta({ type: "common.Tenant", name: rt.tenant, id: rt.tenant }) });
  const conversation = withMeta({ type: "common.Conversation", name: `offsite ${ulid()}`, parent: tenant });
  await rt.resources.put({ meta: conversation, channel: { kind: "cli" }, title: "Team offsite" });
  const message = withMeta({ type: "common.Message", name: "request", parent: conversation.id });
  await rt.resources.put({ meta: message, role: "user", content: REQUEST });

  const tasks: { urn: Urn; spec: TaskSpec; children: Urn[] }[] = [];
  const materialise = async (spec: TaskSpec, parent: Urn): Promise<Urn> => {
    const meta = withMeta({
      type: "plan.Task",
      name: spec.name,
      parent,
      purpose: spec.purpose,
      evaluation: spec.evaluation,
    });
    await rt.resources.put({ meta, priority: spec.priority ?? "normal" });
    const entry = { urn: meta.id, spec, children: [] as Urn[] };
    tasks.push(entry);
    for (const sub of spec.subtasks ?? []) entry.children.push(await materialise(sub, meta.id));
    return meta.id;
  };
  const root = await materialise(PLAN, message.id);
  write(`1. Wrote ${tasks.length + 3} resources under ${conversation.id}`);
  write(note(`   each one a file named by its URN, e.g. ${root}.json`));

  // 2. Every task enters the log; parents subscribe to completions under their URN prefix.
  for (const t of tasks) {
    const parent = parentUrn(t.urn) as Urn;
    await rt.tasks.record(
      taskEvent(
        "TaskCreated",
        {
          taskId: t.urn,
          title: t.spec.name,
          intent: t.spec.purpose ?? t.spec.name,
          priority: "normal",
          ...(parent === message.id ? {} : { parentTaskId: parent }),
        },
        PERSON,
        eventIdFor(t.urn, "created"),
      ),
    );
  }
  let deliveries = 0;
  const seen = new Set<string>();
  for (const t of tasks.filter((x) => x.children.length > 0)) {
    rt.bus.subscribe({
      name: `supervise ${t.urn}`,
      pattern: {
        source: ["arbor"],
        "detail-type": ["RESOURCE_PUT"],
        detail: { urn: [{ prefix: `${t.urn}/` }] },
      },
      handler: async (event) => {
        deliveries++;
        seen.add(event.id);
        await onChildOutput(rt, t, event, publishOutput);
      },
    });
  }
  write(
    `2. Logged ${tasks.length} TaskCreated events; ${tasks.filter((x) => x.children.length).length} parents subscribed to RESOURCE_PUT under their own URN`,
  );

  // 3. Leaves answer; each answer is a Message under the task, announced on the bus.
  async function publishOutput(task: Urn, text: string, actor: Actor): Promise<void> {
    const out = withMeta({ type: "common.Message", name: "output", parent: task });
    const { urn, contentHash } = await rt.resources.put({ meta: out, role: "assistant", content: text });
    // Complete first, then announce: a supervisor woken by the event must see the child done.
    await rt.tasks.record(
      taskEvent(
        "TaskCompleted",
        { taskId: task, output: urn, summary: text.slice(0, 120) },
        actor,
        eventIdFor(task, "completed"),
      ),
    );
    await rt.bus.publish([
      {
        id: eventIdFor(urn, contentHash),
        source: "arbor",
        detailType: "RESOURCE_PUT",
        detail: { urn, resourceType: "common.Message", contentHash },
        resources: [urn],
      },
    ]);
  }
  for (const t of tasks) {
    await rt.tasks.record(
      taskEvent(
        "TaskStarted",
        { taskId: t.urn },
        { id: "agent_demo", kind: "agent" },
        eventIdFor(t.urn, "started"),
      ),
    );
  }
  const leaves = tasks.filter((t) => t.children.length === 0);
  await Promise.all(
    leaves.map((t) =>
      publishOutput(t.urn, CANNED[t.spec.name] ?? "done", { id: "agent_demo", kind: "agent" }),
    ),
  );
  await rt.bus.idle();
  let completions = 0;
  for (const t of tasks)
    completions += (await rt.state.readStream(t.urn)).filter((e) => e.type === "TaskCompleted").length;
  write(
    `3. ${leaves.length} leaves answered (canned answers: the agents arrive with the orchestration engine)`,
  );
  write(
    `   completions climbed the tree through the bus, every event delivered twice (${deliveries} deliveries of ${seen.size} distinct events)`,
  );
  write(
    `   the log holds ${completions} TaskCompleted for ${tasks.length} tasks: each completion recorded once`,
  );

  // 4. The log is the truth: rebuild every view from it and compare.
  const replayed = await rt.tasks.replay();
  let same = 0;
  for (const t of tasks)
    if (JSON.stringify(replayed.get(t.urn)) === JSON.stringify(await rt.tasks.view(t.urn))) same++;
  write(
    `4. Replayed the event log: ${replayed.size} task views rebuilt, ${same} of ${tasks.length} identical to the stored ones`,
  );
  write("");
  await printTaskTree(rt, root, write);
  write("");
  write(
    note(
      `Done in ${Math.round(performance.now() - started)} ms. Look around:\n  npx arbor ls ${conversation.id} --all\n  npx arbor events ${root}\n  npx arbor replay`,
    ),
  );
  if (same !== tasks.length || completions !== tasks.length)
    throw new ArborError(
      "INTERNAL",
      "The log and the stored views disagree: run arbor replay to see which tasks differ",
    );
}

/** A parent's supervisor: counts each direct child's output once; when all are in, it answers too. */
async function onChildOutput(
  rt: LocalRuntime,
  parent: { urn: Urn; spec: TaskSpec; children: Urn[] },
  event: BusEnvelope,
  publishOutput: (task: Urn, text: string, actor: Actor) => Promise<void>,
): Promise<void> {
  const outputUrn = String(event.detail.urn);
  const child = parentUrn(outputUrn);
  if (!child || !parent.children.includes(child)) return; // a deeper descendant: its own parent handles it
  const views = await Promise.all(parent.children.map((c) => rt.tasks.view(c)));
  if (!views.every((v) => v?.status === "done")) return;
  const summary = views.map((v) => `${v?.title}: ${v?.summary ?? ""}`).join("\n");
  await publishOutput(parent.urn, summary, { id: "agent_supervisor", kind: "agent" });
}
