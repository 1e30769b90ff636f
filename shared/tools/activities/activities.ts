import * as z from "zod";
import { formatIssues } from "../../domain/resources.ts";
import { TooLargeError, ValidationError } from "../../kernel/errors.ts";
import { componentLogger } from "../../kernel/logger.ts";
import type {
  ActivityCall,
  ScopedMessage,
  ToolBinding,
  ToolContext,
  ToolDescriptor,
} from "../../ports/tools.ts";
import { parametersOf } from "../service/zod-parameters.ts";
import { OUTPUT_PATH_DOC, withOutputPath } from "./activity-paths.ts";

/**
 * Activities (seed 004): tools whose handler is deterministic code that gets the whole call
 * `(call, tool, context)`: the call with its meta-properties (`_outputPath`, `_instance`), the
 * tool's own descriptor (its schema, its declared output schema), and the messages the task
 * scoped in (its prompt and its transcript up to the call). The engine decides how a call runs
 * (engine/turn/activities.ts): with `_outputPath` it is awaited and its value stored in the task's
 * state; without, it is fire-and-forget.
 *
 * A handler returns a value (stored at the call's single output path), or, to branch,
 * `{ outputPath, value }` naming one of the alternatives it was offered (`call.outputPaths`).
 * Anything else with a branching path is an error and nothing is written.
 */
export interface ActivityFunction<S extends z.ZodObject = z.ZodObject> {
  description: string;
  schema: S;
  /** The JSON Schema of the value it stores (the tool's `outputSchema`). */
  output?: Record<string, unknown>;
  risky?: boolean;
  pure?: boolean;
  run(
    call: ActivityCall & { arguments: z.output<S> },
    tool: ToolDescriptor,
    context: readonly ScopedMessage[],
    toolContext: ToolContext,
  ): Promise<ActivityOutcome> | ActivityOutcome;
}

/** A value to store, or a branch choice. */
export type ActivityOutcome = unknown;

export interface BranchChoice {
  outputPath: string;
  value: unknown;
}

const isBranchChoice = (v: unknown): v is BranchChoice =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as { outputPath?: unknown }).outputPath === "string" &&
  "value" in v &&
  Object.keys(v).length === 2;

/** The most a stored value may take, as JSON (state is shown to the model, bounded). */
export const MAX_STATE_VALUE_CHARS = 8000;

export const defineActivity = <S extends z.ZodObject>(f: ActivityFunction<S>): ActivityFunction =>
  f as unknown as ActivityFunction;

/** What an activity with an output path returns to the engine, as its result text (JSON). */
export interface StoredOutcome {
  outputPath: string;
  value: unknown;
}

/**
 * Reads an activity's result text back into the path it chose and its value (the engine's side
 * of StoredOutcome); the problem when it is not one, or names a path not offered.
 */
export function readStoredOutcome(
  content: string,
  offered: readonly string[],
): { ok: true; outcome: StoredOutcome } | { ok: false; problem: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return { ok: false, problem: "the activity's result is not its stored outcome" };
  }
  if (!isBranchChoice(parsed)) return { ok: false, problem: "the activity's result names no output path" };
  if (!offered.includes(parsed.outputPath))
    return {
      ok: false,
      problem: `the activity chose ${JSON.stringify(parsed.outputPath.slice(0, 100))}, which is not one of ${offered.join(" || ")}`,
    };
  return { ok: true, outcome: parsed };
}

/** A tool named `name` bound to an activity. */
export function activityBinding(
  name: string,
  f: ActivityFunction,
  options: { description?: string; risky?: boolean } = {},
): ToolBinding {
  const parameters = parametersOf(f.schema);
  const descriptor: ToolDescriptor = {
    name,
    kind: "builtin",
    description: `${options.description ?? f.description} (An activity: ${OUTPUT_PATH_DOC})`,
    parameters: withOutputPath(parameters),
    risky: options.risky ?? f.risky ?? false,
    pure: f.pure ?? false,
    activity: true,
    ...(f.output ? { outputSchema: f.output } : {}),
  };
  return {
    descriptor,
    check: (args) => {
      const parsed = f.schema.safeParse(args);
      return parsed.success ? [] : formatIssues(parsed.error);
    },
    run: async (args, context) => {
      const given = context.activity?.call;
      const call: ActivityCall = {
        ...given,
        id: given?.id ?? context.callId,
        name,
        arguments: f.schema.parse(args),
      };
      const outcome = await f.run(call, descriptor, context.activity?.context ?? [], context);
      const offered = call.outputPaths ?? [];
      if (offered.length === 0)
        return typeof outcome === "string" ? outcome : JSON.stringify(outcome ?? null);
      let stored: StoredOutcome;
      if (isBranchChoice(outcome)) stored = outcome;
      else if (offered.length === 1) stored = { outputPath: offered[0] as string, value: outcome ?? null };
      else
        throw new ValidationError(
          `${name} was offered ${offered.join(" || ")} and must choose one ({ outputPath, value }); it chose none`,
        );
      if (!offered.includes(stored.outputPath))
        throw new ValidationError(
          `${name} chose ${JSON.stringify(stored.outputPath.slice(0, 100))}, which is not one of ${offered.join(" || ")}; nothing was stored`,
        );
      const text = JSON.stringify({ outputPath: stored.outputPath, value: stored.value ?? null });
      if (text.length > MAX_STATE_VALUE_CHARS)
        throw new TooLargeError(
          `${name}'s value is longer than ${MAX_STATE_VALUE_CHARS} characters as JSON; nothing was stored`,
          { limit: MAX_STATE_VALUE_CHARS, chars: text.length },
        );
      return text;
    },
  };
}

// ---- the built-in activities -------------------------------------------------------------------

const log = componentLogger("activity");

/**
 * Compares a number with a threshold. With `_outputPath: "state.high || state.low"` it stores to
 * the first alternative when `value >= threshold`, else to the second (it branches); with one path
 * it stores the comparison there.
 */
const compareThreshold = defineActivity({
  description:
    'Compares a number with a threshold. Give `_outputPath: "state.<above> || state.<below>"` to store ' +
    "the comparison at the first path when value >= threshold, else at the second.",
  schema: z.object({ value: z.number(), threshold: z.number(), label: z.string().max(200).optional() }),
  output: {
    type: "object",
    properties: { value: { type: "number" }, threshold: { type: "number" }, above: { type: "boolean" } },
  },
  pure: true,
  run: ({ arguments: { value, threshold, label }, outputPaths }) => {
    const above = value >= threshold;
    const result = { value, threshold, above, ...(label ? { label } : {}) };
    if (!outputPaths || outputPaths.length < 2) return result;
    if (outputPaths.length !== 2)
      throw new ValidationError(
        "compare_threshold branches two ways: give exactly two alternatives (above || below)",
      );
    return { outputPath: above ? outputPaths[0] : outputPaths[1], value: result };
  },
});

/**
 * Records a note in the log (the structured logger, with the task and the call); the audit log
 * records the call too. A natural fire-and-forget: call it without `_outputPath`.
 */
const notifyLog = defineActivity({
  description: "Records a note about the task in Arbor's log (fire-and-forget: it returns at once).",
  schema: z.object({
    message: z.string().min(1).max(4000),
    level: z.enum(["info", "warn"]).default("info"),
  }),
  run: ({ id, arguments: { message, level }, _instance }, _tool, context, toolContext) => {
    log[level]("activity note", {
      urn: toolContext.taskId,
      callId: id,
      actor: toolContext.actor,
      note: message,
      ...(_instance ? { instance: _instance } : {}),
      scopedMessages: context.length,
    });
    return `noted: ${message.slice(0, 200)}`;
  },
});

export const ACTIVITY_NAMES = ["compare_threshold", "notify_log"] as const;
export type ActivityName = (typeof ACTIVITY_NAMES)[number];
export const ACTIVITIES: Record<ActivityName, ActivityFunction> = {
  compare_threshold: compareThreshold,
  notify_log: notifyLog,
};
export const isActivityName = (name: string): name is ActivityName =>
  (ACTIVITY_NAMES as readonly string[]).includes(name);
