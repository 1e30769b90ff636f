import * as z from "zod";
import { expiresAfter, RETENTION_MS } from "../../domain/retention.ts";
import { ConflictError } from "../../kernel/errors.ts";
import type { ActivityCall, ToolResult } from "../../ports/tools.ts";
import { claim, finishClaim } from "../claims.ts";
import { COMMANDS, type EngineDeps, send } from "../context.ts";
import { scopedMessages } from "./activity-state.ts";

/**
 * Fire-and-forget activities (seed 004: an activity call without `_outputPath`). The turn records
 * the call (a state record, on disk), publishes ACTIVITY_REQUESTED, and goes on at once: the model
 * is told "started, not awaited", and nothing waits for the call or stores its result. The
 * activity step then runs it through the tool port (audited, with the call's idempotency key), in
 * its own invocation: on AWS its own Lambda, so nothing is left running in a turn step that has
 * returned (and frozen).
 *
 * Once, whatever the bus does: the record says whether the call is still to run; a claim lets one
 * delivery of the command run it (a duplicate finds it held or done); a crash between the record
 * and the publish is repaired by the turn's re-drive (the call has no result yet, so the turn
 * records again, finds the record, publishes the same command id) or by the watchdog
 * (redriveActivities); a call the audit log shows started and never ended is not run again (an
 * effect whose outcome a crash made unknown is never repeated silently), unless the tool is pure.
 */
const RUN_CLAIM_STALE_MS = 15 * 60_000;

export type ActivityStatus = "requested" | "done" | "failed" | "unknown";

export interface ActivityRecordData {
  taskId: string;
  slot: string;
  turn: number;
  actor: string;
  allowedTools: string[];
  call: ActivityCall;
  /** How it ended (status done / failed / unknown): the start of its result, for the operator. */
  outcome?: string;
}

export const activityKey = (taskId: string, slot: string) => `activity#${taskId}#${slot}`;

const CommandSchema = z.object({
  taskId: z.string().min(1).max(2000),
  slot: z.string().regex(/^turn-\d{4,}-tool-\d+$/),
});

/**
 * Records a fire-and-forget call and sends it off (idempotent: a re-driven turn records nothing
 * new and sends the same command id). What the model is told.
 */
export async function fireActivity(deps: EngineDeps, data: ActivityRecordData): Promise<ToolResult> {
  const key = activityKey(data.taskId, data.slot);
  const now = deps.clock();
  try {
    await deps.state.transact([
      {
        op: "put",
        record: {
          key,
          kind: "activity",
          parent: data.taskId,
          status: "requested",
          updatedAt: now.toISOString(),
          expiresAt: expiresAfter(now, RETENTION_MS.claim),
          data,
        },
        expectedVersion: 0,
      },
    ]);
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e; // recorded before (a re-driven turn): send it again
  }
  await send(deps, COMMANDS.activity, { taskId: data.taskId, slot: data.slot }, data.taskId, data.slot);
  return {
    content: `Started ${data.call.name} in the background (fire-and-forget: not awaited, its result is not stored).`,
  };
}

/** The activity step: runs a recorded fire-and-forget call once. */
export async function runActivity(deps: EngineDeps, detail: Record<string, unknown>): Promise<void> {
  const parsed = CommandSchema.safeParse(detail);
  if (!parsed.success) {
    deps.log.warn("activity command ignored: not { taskId, slot }", { detail });
    return;
  }
  const key = activityKey(parsed.data.taskId, parsed.data.slot);
  const record = await deps.state.get<ActivityRecordData>(key);
  if (record?.status !== "requested") return; // unknown, or run already
  const runClaim = `${key}#run`;
  if (!(await claim(deps, runClaim, RUN_CLAIM_STALE_MS))) return; // another delivery runs it
  const { data } = record;
  const [descriptor] = deps.tools.describe([data.call.name]);
  const history = await deps.tools.history(data.taskId, data.call.id);
  let status: ActivityStatus;
  let outcome: string;
  if (history.running) return; // this process runs it now (its claim was taken over): that run ends it
  if (history.last === "completed" || history.last === "failed") {
    status = history.last === "completed" ? "done" : "failed";
    outcome = `ran before (attempt ${history.attempts})`;
  } else if (history.last === "unknown" && !descriptor?.pure) {
    status = "unknown";
    outcome = "started before and never ended (a crash): not run again";
    deps.log.warn("activity not run again: its last attempt started and has no outcome", {
      urn: data.taskId,
      callId: data.call.id,
      tool: data.call.name,
    });
  } else {
    const context = await scopedMessages(deps, data.taskId, data.turn);
    if (!descriptor?.pure) await deps.untilDurable();
    const result = await deps.tools.execute(data.call.name, data.call.arguments, {
      taskId: data.taskId,
      actor: data.actor,
      callId: data.call.id,
      allowedTools: data.allowedTools,
      activity: { call: data.call, context },
    });
    status = result.isError ? "failed" : "done";
    outcome = result.content.slice(0, 1000);
  }
  await settleRecord(deps, key, record.version, status, outcome);
  await finishClaim(deps, runClaim);
}

async function settleRecord(
  deps: EngineDeps,
  key: string,
  version: number,
  status: ActivityStatus,
  outcome: string,
): Promise<void> {
  const current = await deps.state.get<ActivityRecordData>(key);
  if (!current || current.version !== version) return;
  const now = deps.clock();
  await deps.state
    .transact([
      {
        op: "put",
        record: {
          key,
          kind: "activity",
          parent: current.data.taskId,
          status,
          updatedAt: now.toISOString(),
          expiresAt: expiresAfter(now, RETENTION_MS.claim),
          data: { ...current.data, outcome },
        },
        expectedVersion: version,
      },
    ])
    .catch((e: unknown) => {
      if (!(e instanceof ConflictError)) throw e;
    });
}

/**
 * Sends again the commands of fire-and-forget calls still to run that were recorded before
 * `before` (a command lost after its record, or whose deliveries all failed): the watchdog's part
 * for activities, which may outlive their task. The number sent.
 */
export async function redriveActivities(deps: EngineDeps, before: string): Promise<number> {
  let sent = 0;
  const page = await deps.state.byStatus<ActivityRecordData>("activity", "requested", {
    updatedBefore: before,
    limit: 1000,
  });
  for (const listed of page.items) {
    const record = await deps.state.get<ActivityRecordData>(listed.key); // the index only finds candidates
    if (record?.status !== "requested" || record.updatedAt >= before) continue;
    sent++;
    const { taskId, slot } = record.data;
    await send(deps, COMMANDS.activity, { taskId, slot }, taskId, slot, `watchdog:${before}`);
  }
  return sent;
}
