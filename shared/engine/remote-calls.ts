import { createHash, timingSafeEqual } from "node:crypto";
import type { ToolCall } from "../domain/resources.ts";
import { expiresAfter, RETENTION_MS } from "../domain/retention.ts";
import { ConflictError } from "../errors.ts";
import type { StateRecord } from "../ports/state-store.ts";
import type { PendingCall, ToolContext, ToolResult } from "../ports/tools.ts";
import { COMMANDS, type EngineDeps, send } from "./context.ts";

/**
 * Tool calls a remote agent answers later (an A2A agent that pushes: tools/a2a-agent.ts). Such a
 * call holds no turn: the leaf's turn ends with the call unresolved and nothing running, the task
 * stays `in_progress` (not `awaiting_user`: nobody is asked anything, and a channel would show it
 * as input-required), and this record is the durable "waiting on a remote" mark:
 *
 *   remote-call#<callbackId>               the call: its task and slot, the remote task, the
 *                                          token's hash, the deadline; status pending -> settled
 *   remote-call-of#<taskId>#<slot>         which callback a slot of the transcript waits on
 *
 * The push (POST /v1/a2a-callbacks/<callbackId>) settles it: the outcome goes into the record by a
 * conditional write (pending -> settled, once: a repeat, a late or an out-of-order push changes
 * nothing) and the leaf's next turn is sent; the turn writes the tool's result from the record
 * (a crash in between loses nothing: the record holds it). Without a push, the deadline: the
 * watchdog re-drives a leaf that stopped moving, and the turn, finding the deadline past, asks the
 * remote once (tools.settle) and settles the call the same way.
 */
export interface RemoteCall {
  taskId: string;
  /** The transcript's name of the call's result, e.g. `turn-0001-tool-0`. */
  slot: string;
  tool: string;
  context: Pick<ToolContext, "taskId" | "actor" | "callId" | "allowedTools">;
  pending: PendingCall;
  /** Once settled: the tool's result. */
  result?: ToolResult;
}

const KIND = "remote-call";
const callKey = (callbackId: string) => `remote-call#${callbackId}`;
const slotKey = (taskId: string, slot: string) => `remote-call-of#${taskId}#${slot}`;

/**
 * Keeps a call that was handed off, before its turn ends. A slot that waits on a call already (a
 * step driven twice at once handed it off twice) keeps the first: the second's push finds no call.
 */
export async function holdRemoteCall(deps: EngineDeps, call: Omit<RemoteCall, "result">): Promise<void> {
  const now = deps.clock();
  const expiresAt = expiresAfter(new Date(Date.parse(call.pending.deadline)), RETENTION_MS.claim);
  const updatedAt = now.toISOString();
  try {
    await deps.state.transact([
      {
        op: "put",
        record: {
          key: callKey(call.pending.callbackId),
          kind: KIND,
          parent: call.taskId,
          status: "pending",
          updatedAt,
          expiresAt,
          data: call,
        },
        expectedVersion: 0,
      },
      {
        op: "put",
        record: {
          key: slotKey(call.taskId, call.slot),
          kind: "remote-call-of",
          updatedAt,
          expiresAt,
          data: { callbackId: call.pending.callbackId },
        },
        expectedVersion: 0,
      },
    ]);
  } catch (e) {
    // The slot was handed off already (a step driven twice at once): the first call is waited on.
    if (!(e instanceof ConflictError)) throw e;
  }
}

/**
 * What the slot's remote call says, in the turn: nothing kept (run the call), "waiting" (its
 * deadline is to come), or its result (settled now if the deadline has passed).
 */
export async function remoteOutcome(
  deps: EngineDeps,
  taskId: string,
  slot: string,
): Promise<ToolResult | "waiting" | undefined> {
  const of = await deps.state.get<{ callbackId: string }>(slotKey(taskId, slot));
  if (!of) return undefined;
  const record = await deps.state.get<RemoteCall>(callKey(of.data.callbackId));
  if (!record) return undefined;
  if (record.data.result) return record.data.result;
  if (deps.clock().getTime() < Date.parse(record.data.pending.deadline)) return "waiting";
  const { tool, pending, context } = record.data;
  const result = await deps.tools.settle?.(tool, pending, undefined, context);
  if (!result) return "waiting"; // a tool port that cannot settle: the call stays out
  return (await settleRecord(deps, record, result)) ?? result;
}

/**
 * The leaf waits on a remote call whose deadline is still to come: it has not stopped moving, so
 * the watchdog leaves it (a call past its deadline is re-driven, and settled by the turn).
 */
export async function waitsOnRemote(deps: EngineDeps, taskId: string): Promise<boolean> {
  const now = deps.clock().getTime();
  const { items } = await deps.state.byParent<RemoteCall>(taskId, { limit: 100 });
  return items.some(
    (r) => r.kind === KIND && r.status === "pending" && now < Date.parse(r.data.pending.deadline),
  );
}

export type PushOutcome = "unknown" | "unauthorized" | "accepted" | "settled" | "already-settled";

/**
 * A push for a callback: checks the token against the kept hash (constant time), then lets the
 * tool read the body. A final answer settles the call once and sends the leaf's next turn; a
 * task still running, or a call settled already, changes nothing. A body about another task
 * throws ValidationError (nothing written).
 */
export async function receivePush(
  deps: EngineDeps,
  callbackId: string,
  token: string | undefined,
  body: unknown,
): Promise<PushOutcome> {
  const record = await deps.state.get<RemoteCall>(callKey(callbackId));
  if (!record || record.kind !== KIND) return "unknown";
  if (!token || !sameHash(token, record.data.pending.tokenHash)) return "unauthorized";
  if (record.data.result) return "already-settled";
  const { tool, pending, context, taskId } = record.data;
  const result = await deps.tools.settle?.(tool, pending, body, context);
  if (!result) return "accepted";
  if ((await settleRecord(deps, record, result)) !== undefined) return "already-settled";
  await send(deps, COMMANDS.turn, { taskId, turn: 0 }, taskId, `remote:${callbackId}`);
  return "settled";
}

/** pending -> settled with `result`; undefined when this write won, else the result that did. */
async function settleRecord(
  deps: EngineDeps,
  record: StateRecord<RemoteCall>,
  result: ToolResult,
): Promise<ToolResult | undefined> {
  const { pending: _, ...kept } = result;
  try {
    await deps.state.transact([
      {
        op: "put",
        record: {
          key: record.key,
          kind: KIND,
          parent: record.data.taskId,
          status: "settled",
          updatedAt: deps.clock().toISOString(),
          ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
          data: { ...record.data, result: kept },
        },
        expectedVersion: record.version,
      },
    ]);
    return undefined;
  } catch (e) {
    if (!(e instanceof ConflictError)) throw e;
    const now = await deps.state.get<RemoteCall>(record.key);
    return now?.data.result ?? result;
  }
}

function sameHash(token: string, hexHash: string): boolean {
  const given = createHash("sha256").update(token).digest();
  const kept = Buffer.from(hexHash, "hex");
  return kept.length === given.length && timingSafeEqual(given, kept);
}

/** The context a remote call is settled with (what execute was given). */
export const remoteContext = (
  call: ToolCall,
  taskId: string,
  actor: string,
  allowedTools: readonly string[],
) => ({
  taskId,
  actor,
  callId: call.id,
  allowedTools: [...allowedTools],
});
