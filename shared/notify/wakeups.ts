import { formatUrn, isUrn, parseUrn } from "../domain/urn.ts";
import { COMMANDS, SOURCE } from "../engine/context.ts";
import { INTERACTION_REQUESTED } from "../engine/interactions.ts";
import { rootTaskUrn } from "../engine/steps/planner.ts";
import type { EventPattern } from "../kernel/event-pattern/index.ts";
import type { BusEnvelope } from "../ports/event-bus.ts";

/**
 * The engine's events that may mean a request moved: the notify path wakes on them and reconciles
 * the request they concern (reconcile.ts reads its state; the event only says where to look).
 * As data, so the local worker subscribes with them and the AWS rule uses the same patterns:
 *
 *   bus.subscribe({ name: NOTIFY_WAKE_RULE, pattern: NOTIFY_WAKE_PATTERN, handler });
 *   const root = requestOfWakeup(event);   // the root task URN, or undefined
 *
 *   - RESOURCE_PUT of an output (source `arbor`): every ending of any task writes and announces it;
 *   - INTERACTION_REQUESTED (a task waits for a person), INTERACTION_ANSWERED (it goes on),
 *     TASK_READY and PLAN_REQUESTED (source `arbor.engine`): the request is planned and working;
 *   - TURN_REQUESTED of turn 1 (a task started: elected, in progress) or 0 (a task goes on after an
 *     answer, a remote agent's push or the watchdog), not the turns after (nothing a thread shows
 *     moves between a task's turns): a chat thread shows each task's status and assistant, and the
 *     TASK_READY that starts a task is read before its start is recorded (the step runs on the same
 *     event), so its first turn's command is what says it started. No other event says so: the task
 *     log's own events (TaskStarted, ...) are not on the bus.
 */
export const NOTIFY_WAKE_RULE = "notify-wake";

export const NOTIFY_WAKE_PATTERNS: readonly EventPattern[] = [
  { source: ["arbor"], "detail-type": [COMMANDS.resourcePut], detail: { name: ["output"] } },
  {
    source: [SOURCE],
    "detail-type": [INTERACTION_REQUESTED, COMMANDS.resume, COMMANDS.ready, COMMANDS.plan],
  },
  { source: [SOURCE], "detail-type": [COMMANDS.turn], detail: { turn: [0, 1] } },
];

/** The patterns as one ($or), for a bus or a rule that takes one pattern. */
export const NOTIFY_WAKE_PATTERN: EventPattern = { $or: [...NOTIFY_WAKE_PATTERNS] };

/** The root task of the request a URN lies in (the URN cut after its first plan.Task), or undefined. */
export function requestOf(urn: string): string | undefined {
  if (!isUrn(urn)) return undefined;
  const elements = parseUrn(urn);
  const first = elements.findIndex((e) => e.pkg === "plan" && e.type === "Task");
  return first === -1 ? undefined : formatUrn(elements.slice(0, first + 1));
}

/** The request a wake-up concerns: its root task URN, or undefined when it names none. */
export function requestOfWakeup(event: Pick<BusEnvelope, "detail-type" | "detail">): string | undefined {
  const d = event.detail;
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  switch (event["detail-type"]) {
    case COMMANDS.resourcePut:
      return requestOf(str(d.urn) ?? "");
    case COMMANDS.plan: {
      const message = str(d.messageUrn);
      return message && isUrn(message) ? rootTaskUrn(message) : undefined;
    }
    case COMMANDS.resume:
      return requestOf(str(d.interactionUrn) ?? "");
    default:
      return requestOf(str(d.taskId) ?? "");
  }
}
