import type { Assistant } from "../../domain/resources.ts";
import type { LlmToolSpec } from "../../ports/llm.ts";
import type { ActivityCall, ToolDescriptor, ToolResult } from "../../ports/tools.ts";
import { readStoredOutcome } from "../../tools/activities/activities.ts";
import { parseOutputPath, splitMeta, withOutputPath } from "../../tools/activities/activity-paths.ts";
import type { EngineDeps } from "../context.ts";
import { scopedMessages, stateNote, writeState } from "./activity-state.ts";
import { fireActivity } from "./activity-step.ts";

/**
 * Activities and output paths in a leaf's inner loop (seed 004), opt-in: a leaf is
 * "activity-aware" when its assistant has at least one activity among its tools
 * (ToolDescriptor.activity). Any other leaf runs its calls exactly as before: nothing here
 * touches them.
 *
 * In an activity-aware leaf, every call's meta-properties (`_outputPath`, `_instance`) are taken
 * off its arguments before the tool's own schema check, and:
 *   - an activity with `_outputPath` is awaited; its handler gets `(call, tool, context)` and may
 *     choose among `a || b`; the value is stored at the path it chose, in the task's state;
 *   - an activity without one is fire-and-forget (activity-step.ts);
 *   - any other tool's call is a "latent" call (the model's own reasoning step): with
 *     `_outputPath` its result is stored there too; a branching path is collapsed to its first
 *     alternative, recorded (a latent call cannot branch on its own output: the model planned it
 *     and runs it in one go, seed 004 section 2, the first iteration of an eager plan; Arbor's
 *     leaves always run this way); without one its result is ephemeral: shown in the next turn,
 *     elided from later turns' messages.
 */

/** How a call runs. */
export type CallMode = "activity-stored" | "activity-fire" | "latent-stored" | "latent-ephemeral";

export interface PreparedCall {
  /** The call as the tool sees it: its own arguments only. */
  call: { id: string; name: string; arguments: Record<string, unknown> };
  activity: ActivityCall;
  mode: CallMode;
  /** A latent call's branching path, collapsed to its first alternative. */
  collapsedFrom?: string;
}

/** Whether a leaf whose assistant has these tools is activity-aware. */
export function activityAware(deps: EngineDeps, assistant: Assistant): boolean {
  return deps.tools.describe(assistant.tools).some((t) => t.activity);
}

/** The tools as the model sees them: in an activity-aware leaf every one advertises `_outputPath`. */
export function advertised(tools: readonly ToolDescriptor[]): LlmToolSpec[] {
  const aware = tools.some((t) => t.activity);
  return tools.map((t) => ({
    name: t.name,
    description: t.description,
    parameters: aware ? withOutputPath(t.parameters) : t.parameters,
  }));
}

/** The task's state for the system prompt of an activity-aware leaf; nothing (and no read) for others. */
export async function stateNoteFor(
  deps: EngineDeps,
  taskId: string,
  tools: readonly ToolDescriptor[],
): Promise<string> {
  return tools.some((t) => t.activity) ? stateNote(deps, taskId) : "";
}

/**
 * Takes a call's meta-properties off (only in an activity-aware leaf: undefined otherwise, and
 * the call runs as ever). An invalid `_outputPath` or `_instance` is an error result: nothing runs.
 */
export function prepareCall(
  aware: boolean,
  descriptor: ToolDescriptor | undefined,
  call: { id: string; name: string; arguments: Record<string, unknown> },
): PreparedCall | { error: ToolResult } | undefined {
  if (!aware || !descriptor) return undefined;
  const { own, meta } = splitMeta(call.arguments);
  const activity: ActivityCall = { id: call.id, name: call.name, arguments: own };
  if (meta._instance !== undefined) {
    if (typeof meta._instance !== "string" || meta._instance.length > 200)
      return { error: { content: "Invalid _instance: a string of at most 200 characters", isError: true } };
    activity._instance = meta._instance;
  }
  const stripped = { id: call.id, name: call.name, arguments: own };
  if (meta._outputPath === undefined)
    return { call: stripped, activity, mode: descriptor.activity ? "activity-fire" : "latent-ephemeral" };
  const parsed = parseOutputPath(meta._outputPath);
  if (!parsed.ok) return { error: { content: `Invalid ${parsed.problem}. Nothing ran.`, isError: true } };
  activity._outputPath = meta._outputPath as string;
  if (descriptor.activity)
    return { call: stripped, activity: { ...activity, outputPaths: parsed.paths }, mode: "activity-stored" };
  const [first] = parsed.paths as [string, ...string[]];
  return {
    call: stripped,
    activity: { ...activity, outputPaths: [first] },
    mode: "latent-stored",
    ...(parsed.paths.length > 1 ? { collapsedFrom: meta._outputPath as string } : {}),
  };
}

export interface CallPlace {
  taskId: string;
  turn: number;
  slot: string;
  assistant: Assistant;
  /** What must be on record first (the turn that asks for the call: ToolContext.after). */
  after?: Promise<unknown> | undefined;
}

/**
 * Runs a prepared call: `run` executes it through the tool port with the given activity context.
 * What the model is told; `ephemeral` when the result is to be shown in the next turn only.
 */
export async function runPrepared(
  deps: EngineDeps,
  prepared: PreparedCall,
  place: CallPlace,
  run: (extra: {
    activity?: { call: ActivityCall; context: Awaited<ReturnType<typeof scopedMessages>> };
  }) => Promise<ToolResult>,
): Promise<{ result: ToolResult; ephemeral?: boolean }> {
  const { mode, activity } = prepared;
  // The turn on record before anything here reads the transcript or starts an activity.
  await place.after;
  if (mode === "activity-fire") {
    const result = await fireActivity(deps, {
      taskId: place.taskId,
      slot: place.slot,
      turn: place.turn,
      actor: place.assistant.meta.id,
      allowedTools: [...place.assistant.tools],
      call: activity,
    });
    return { result };
  }
  if (mode === "latent-ephemeral") return { result: await run({}), ephemeral: true };
  const source = { tool: activity.name, callId: activity.id, turn: place.turn };
  if (mode === "latent-stored") {
    const result = await run({});
    const path = activity.outputPaths?.[0] as string;
    if (result.isError || result.pending) return { result };
    await writeState(deps, {
      taskId: place.taskId,
      path,
      value: result.content,
      source,
      ...(prepared.collapsedFrom ? { collapsedFrom: prepared.collapsedFrom } : {}),
    });
    const collapsed = prepared.collapsedFrom
      ? ` (${prepared.collapsedFrom} collapsed to its first alternative: this tool does not branch)`
      : "";
    return { result: { content: `Stored at ${path}${collapsed}.\n${result.content}` } };
  }
  // activity-stored: the activity chose among the offered paths (or had one).
  const context = await scopedMessages(deps, place.taskId, place.turn);
  const result = await run({ activity: { call: activity, context } });
  if (result.isError || result.pending) return { result };
  const offered = activity.outputPaths ?? [];
  const read = readStoredOutcome(result.content, offered);
  if (!read.ok)
    return {
      result: { content: `${activity.name} failed: ${read.problem}; nothing was stored.`, isError: true },
    };
  const { outputPath, value } = read.outcome;
  await writeState(deps, { taskId: place.taskId, path: outputPath, value, source });
  const chose = offered.length > 1 ? ` (chosen of ${offered.join(" || ")})` : "";
  return { result: { content: `Stored at ${outputPath}${chose}.\n${JSON.stringify(value)}` } };
}
