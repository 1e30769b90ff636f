import { createHash, timingSafeEqual } from "node:crypto";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../domain/input-limits.ts";
import type { ToolCall } from "../../domain/resources.ts";
import { expiresAfter, RETENTION_MS } from "../../domain/retention.ts";
import { ConflictError, ValidationError } from "../../kernel/errors.ts";
import type { StateRecord } from "../../ports/state-store.ts";
import type { PendingCall, ToolContext, ToolResult } from "../../ports/tools.ts";
import { COMMANDS, type EngineDeps, send } from "../context.ts";

/**
 * Tool calls a remote agent answers later (an A2A agent that pushes: tools/bindings/a2a-agent.ts). Such a
 * call holds no turn: the leaf's turn ends with the call unresolved and nothing running, the task
 * stays `in_progress` (not `awaiting_user`: nobody is asked anything, and a channel would show it
 * as input-required), and this record is the durable "waiting on a remote" mark:
 *
 *   remote-call#<callbackId>               the call: its task and slot, the token's hash, then the
 *                                          remote task and the deadline; status sending (written
 *                                          before the agent is given the callback) -> pending
 *                                          (the send answered: still working) -> settled
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
  callbackId: string;
  /** sha256 (hex) of the token a push must carry. */
  tokenHash: string;
  /** Once the send had its answer (status pending): the remote task and the deadline. */
  pending?: PendingCall;
  /** Pushes that came before that (status sending), in order, read once the call is pending. */
  early?: unknown[];
  /** Once settled: the tool's result. */
  result?: ToolResult;
}

const KIND = "remote-call";
/** How deep a push may nest: a Task's envelope (task, artifacts, parts, data...) around MAX_JSON_DEPTH. */
const MAX_PUSH_DEPTH = MAX_JSON_DEPTH + 16;
/** The most pushes kept from before a send had its answer (an agent that pushes every step): the latest. */
const MAX_EARLY = 20;
const callKey = (callbackId: string) => `remote-call#${callbackId}`;
const slotKey = (taskId: string, slot: string) => `remote-call-of#${taskId}#${slot}`;

/**
 * Records a callback before it is given to the agent (ToolContext.handOff): status `sending`. A
 * push that comes before the send has its answer is kept (`early`); a send that never answers
 * (a crash) leaves a record no slot points to, which expires.
 */
export async function openRemoteCall(
  deps: EngineDeps,
  call: Omit<RemoteCall, "pending" | "early" | "result">,
): Promise<void> {
  const now = deps.clock();
  await deps.state.transact([
    {
      op: "put",
      record: {
        key: callKey(call.callbackId),
        kind: KIND,
        parent: call.taskId,
        status: "sending",
        updatedAt: now.toISOString(),
        expiresAt: expiresAfter(now, RETENTION_MS.claim),
        data: call,
      },
      expectedVersion: 0,
    },
  ]);
}

/**
 * The send answered with a task still working: the call is now pending (the remote task, the
 * deadline) and its slot points to it, and the turn ends. When pushes came early, the first that
 * settles the call does so now, and its result is returned (the turn goes on). A slot that waits
 * on a call already (a step driven twice at once) keeps the first.
 */
export async function holdRemoteCall(
  deps: EngineDeps,
  taskId: string,
  slot: string,
  pending: PendingCall,
): Promise<ToolResult | undefined> {
  const key = callKey(pending.callbackId);
  const expiresAt = expiresAfter(new Date(Date.parse(pending.deadline)), RETENTION_MS.claim);
  for (let tries = 0; tries < 5; tries++) {
    if (await deps.state.get(slotKey(taskId, slot))) return undefined;
    const record = await deps.state.get<RemoteCall>(key);
    if (!record) return undefined; // not opened through handOff: nothing to wait on
    const updatedAt = deps.clock().toISOString();
    try {
      await deps.state.transact([
        {
          op: "put",
          record: {
            key,
            kind: KIND,
            parent: taskId,
            status: "pending",
            updatedAt,
            expiresAt,
            data: { ...record.data, pending },
          },
          expectedVersion: record.version,
        },
        {
          op: "put",
          record: {
            key: slotKey(taskId, slot),
            kind: "remote-call-of",
            updatedAt,
            expiresAt,
            data: { callbackId: pending.callbackId },
          },
          expectedVersion: 0,
        },
      ]);
    } catch (e) {
      if (e instanceof ConflictError) continue; // an early push came meanwhile: read it again
      throw e;
    }
    return settleEarly(deps, key);
  }
  return undefined;
}

/** The pushes that came before the call was pending, read in order: the first that settles it. */
async function settleEarly(deps: EngineDeps, key: string): Promise<ToolResult | undefined> {
  const record = await deps.state.get<RemoteCall>(key);
  const { tool, pending, context, early } = record?.data ?? {};
  if (!record || !pending || !tool || !context || !early?.length) return undefined;
  for (const body of early) {
    const result = await deps.tools.settle?.(tool, pending, body, context).catch((e: unknown) => {
      if (e instanceof ValidationError) return undefined; // not about this call's task
      throw e;
    });
    if (result) return (await settleRecord(deps, record, result)) ?? result;
  }
  return undefined;
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
  const pending = record?.data.pending;
  if (!record || !pending) return undefined;
  if (record.data.result) return record.data.result;
  if (deps.clock().getTime() < Date.parse(pending.deadline)) return "waiting";
  const { tool, context } = record.data;
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
    (r) =>
      r.kind === KIND &&
      r.status === "pending" &&
      r.data.pending !== undefined &&
      now < Date.parse(r.data.pending.deadline),
  );
}

export type PushOutcome = "unknown" | "unauthorized" | "accepted" | "settled" | "already-settled";

/**
 * A push for a callback: checks the token against the kept hash (constant time), then lets the
 * tool read the body. A final answer settles the call once and sends the leaf's next turn; a
 * task still running, or a call settled already, changes nothing. A body about another task, or
 * nested deeper than MAX_PUSH_DEPTH, throws ValidationError (nothing written).
 */
export async function receivePush(
  deps: EngineDeps,
  callbackId: string,
  token: string | undefined,
  body: unknown,
): Promise<PushOutcome> {
  let record = await deps.state.get<RemoteCall>(callKey(callbackId));
  if (!record || record.kind !== KIND) return "unknown";
  if (!token || !sameHash(token, record.data.tokenHash)) return "unauthorized";
  if (record.data.result) return "already-settled";
  // Data as deep as Arbor takes any JSON, inside a Task's envelope: deeper fails whatever reads it.
  if (nestsDeeperThan(body, MAX_PUSH_DEPTH))
    throw new ValidationError(`A push's JSON is nested at most ${MAX_PUSH_DEPTH} levels`);
  // Before the send has its answer: kept, and read once the call is pending (holdRemoteCall).
  for (let tries = 0; !record.data.pending && tries < 5; tries++) {
    if (await keepEarly(deps, record, body)) return "accepted";
    record = await deps.state.get<RemoteCall>(callKey(callbackId));
    if (!record) return "unknown";
  }
  const { tool, pending, context, taskId } = record.data;
  if (!pending) return "accepted"; // five writes lost in a row: the deadline settles it
  const result = await deps.tools.settle?.(tool, pending, body, context);
  if (!result) return "accepted";
  if ((await settleRecord(deps, record, result)) !== undefined) return "already-settled";
  await send(deps, COMMANDS.turn, { taskId, turn: 0 }, taskId, `remote:${callbackId}`);
  return "settled";
}

/** Adds a push to a sending call's early ones; false when the record changed meanwhile. */
async function keepEarly(deps: EngineDeps, record: StateRecord<RemoteCall>, body: unknown): Promise<boolean> {
  // The latest are kept: an agent says it is working as often as it likes, and its final state comes last.
  const early = [...(record.data.early ?? []), body].slice(-MAX_EARLY);
  return rewrite(deps, record, "sending", { ...record.data, early });
}

/** The record in a new status with new data, if nobody wrote it since it was read (false if somebody did). */
async function rewrite(
  deps: EngineDeps,
  record: StateRecord<RemoteCall>,
  status: string,
  data: RemoteCall,
): Promise<boolean> {
  try {
    await deps.state.transact([
      {
        op: "put",
        record: {
          key: record.key,
          kind: KIND,
          parent: record.data.taskId,
          status,
          updatedAt: deps.clock().toISOString(),
          ...(record.expiresAt ? { expiresAt: record.expiresAt } : {}),
          data,
        },
        expectedVersion: record.version,
      },
    ]);
    return true;
  } catch (e) {
    if (e instanceof ConflictError) return false;
    throw e;
  }
}

/** pending -> settled with `result`; undefined when this write won, else the result that did. */
async function settleRecord(
  deps: EngineDeps,
  record: StateRecord<RemoteCall>,
  result: ToolResult,
): Promise<ToolResult | undefined> {
  const { pending: _, ...kept } = result;
  if (await rewrite(deps, record, "settled", { ...record.data, result: kept })) return undefined;
  const now = await deps.state.get<RemoteCall>(record.key);
  return now?.data.result ?? result;
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
