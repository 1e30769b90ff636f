import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { TaskEvent } from "../../shared/domain/events.ts";
import type { TaskSpec } from "../../shared/domain/resources.ts";
import type { AssistantDefinition, Engine } from "../../shared/engine/engine.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import type { Harness } from "./engine-harness.ts";

/** Small scripted scenarios for the engine's invariant tests. */
export const GENERALIST: AssistantDefinition[] = [
  {
    name: "Generalist",
    id: "generalist",
    purpose: "Do any part of any task and report the result",
    tools: ["calculator", "word_count", "send_email"],
  },
];

export const GENERALIST_URN = "cld:common.Tenant.acme/common.Assistant.generalist";

export const firstUser = (r: LlmRequest): string => {
  const m = r.messages.find((x) => x.role === "user");
  return m && "content" in m ? (m.content ?? "") : "";
};
export const taskName = (r: LlmRequest) => /^# Task: (.+)$/m.exec(firstUser(r))?.[1] ?? "";
export const isPlan = (r: LlmRequest) => r.tools?.some((t) => t.name === "create_plan") ?? false;
export const isEvaluation = (r: LlmRequest) => r.tools?.some((t) => t.name === "report_evaluation") ?? false;

export const pass = (answer = "all parts done"): ScriptedTurn => ({
  toolCalls: [{ name: "report_evaluation", arguments: { passed: true, reason: "criteria met", answer } }],
});
export const planOf = (spec: TaskSpec): ScriptedTurn => ({
  toolCalls: [{ name: "create_plan", arguments: spec as unknown as Record<string, unknown> }],
});

/**
 * A root of areas, area `p` with `leaves[p]` parts (leaves); every part answers at once (after
 * `delayMs`), every evaluation passes.
 */
export function areas(leaves: readonly number[], delayMs = 0): { spec: TaskSpec; script: ScriptFunction } {
  const spec: TaskSpec = {
    name: "Survey",
    purpose: "Collect every part of every area",
    subtasks: leaves.map((n, p) => ({
      name: `area ${p + 1}`,
      purpose: `Collect the parts of area ${p + 1}`,
      subtasks: Array.from({ length: n }, (_, l) => ({
        name: `area ${p + 1} part ${l + 1}`,
        purpose: `Report part ${l + 1} of area ${p + 1}`,
      })),
    })),
  };
  const script: ScriptFunction = (r) => {
    if (isPlan(r)) return planOf(spec);
    if (isEvaluation(r)) return pass();
    return { content: `result of ${taskName(r)}`, delayMs };
  };
  return { spec, script };
}

/** A root with `n` leaves; every leaf answers at once (after `delayMs`), every evaluation passes. */
export function fanOut(n: number, delayMs = 0): { spec: TaskSpec; script: ScriptFunction } {
  const spec: TaskSpec = {
    name: "Survey",
    purpose: "Collect every part",
    subtasks: Array.from({ length: n }, (_, i) => ({
      name: `part ${i + 1}`,
      purpose: `Report part ${i + 1}`,
    })),
  };
  const script: ScriptFunction = (r) => {
    if (isPlan(r)) return planOf(spec);
    if (isEvaluation(r)) return pass();
    return { content: `result of ${taskName(r)}`, delayMs };
  };
  return { spec, script };
}

/** One assistant that sends email (a risky tool: every send waits for a person's approval). */
export const MAILER: AssistantDefinition[] = [
  {
    name: "Mailer",
    id: "mailer",
    purpose: "Invite the team by email: invitations and announcements",
    tools: ["send_email"],
  },
];

/** One task, "Invite": its leaf sends one email (once approved), then answers; its evaluation passes. */
export const inviteByEmail: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Invite", purpose: "Invite the team by email" });
  if (isEvaluation(r)) return pass();
  return r.messages.some((m) => m.role === "tool")
    ? { content: "invited" }
    : {
        toolCalls: [{ name: "send_email", arguments: { to: "team@example.com", subject: "Hi", body: "Hi" } }],
      };
};

/** Counts, from now on, the emails `engine` really sends (the send_email calls its tools run). */
export function countEmails(engine: Engine): { sent: number } {
  const counter = { sent: 0 };
  const execute = engine.deps.tools.execute.bind(engine.deps.tools);
  engine.deps.tools.execute = async (name, args, context) => {
    if (name === "send_email") counter.sent++;
    return execute(name, args, context);
  };
  return counter;
}

const TERMINAL = new Set(["TaskCompleted", "TaskFailed", "TaskCanceled"]);

/** Counts, as the task log records them, the leaves in progress at once (the most seen). */
export function watchLeaves(hh: Harness, isLeaf: (taskId: string) => boolean): { most: number; now: number } {
  const seen = { most: 0, now: 0 };
  const log = hh.rt.tasks;
  const record = log.record.bind(log);
  log.record = async (event: TaskEvent) => {
    const result = await record(event);
    if (!result.duplicate && isLeaf(event.payload.taskId)) {
      if (event.type === "TaskStarted") seen.now++;
      else if (TERMINAL.has(event.type)) seen.now--;
      seen.most = Math.max(seen.most, seen.now);
    }
    return result;
  };
  return seen;
}
