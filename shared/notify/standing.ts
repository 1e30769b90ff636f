import type { InteractionResource } from "../domain/resources.ts";
import { isTerminal } from "../domain/task-state.ts";
import type { TaskView } from "../domain/task-view.ts";
import type { EngineDeps } from "../engine/context.ts";
import { waitingInTree } from "../engine/interactions.ts";
import { outputOf } from "../engine/steps/outcome.ts";
import { acceptedView } from "../engine/steps/planner.ts";

/**
 * How a request stands now, read from the state (never from an event), as the notify path tells
 * callers: the engine's states mapped as A2A reads them (readOutcome in protocols/a2a/a2a-mapping.ts,
 * which checks a caller; this one is the engine's own read, for the notify worker):
 *   working | input-required (the first question waiting, the root's first) | completed (the answer)
 *   | failed | canceled (the reason).
 * How to drive it: `const s = await standing(deps, rootTaskUrn); stateKey(s)`.
 * `stateKey` names a standing: two reads with the same key are the same notification.
 */
export type Standing =
  | { state: "working"; view?: TaskView }
  | { state: "input-required"; view: TaskView; interaction: InteractionResource }
  | { state: "completed"; view: TaskView; output: string }
  | { state: "failed" | "canceled"; view: TaskView; reason: string };

export async function standing(d: EngineDeps, rootTaskUrn: string): Promise<Standing> {
  const view = (await d.tasks.view(rootTaskUrn)) ?? (await acceptedView(d, rootTaskUrn));
  if (!view) return { state: "working" };
  if (isTerminal(view.status)) {
    const output = await outputOf(d, rootTaskUrn);
    // Every ending writes the output before it is announced: until it is there, the ending is not over.
    if (output === undefined) return { state: "working", view };
    if (view.status === "done") return { state: "completed", view, output };
    return { state: view.status === "failed" ? "failed" : "canceled", view, reason: output };
  }
  const [interaction] = await waitingInTree(d, rootTaskUrn);
  return interaction ? { state: "input-required", view, interaction } : { state: "working", view };
}

/** The notification a standing is: the same key, the same notification. */
export function stateKey(s: Standing): string {
  return s.state === "input-required" ? `input-required#${s.interaction.meta.id}` : s.state;
}

export const isFinalStanding = (s: Standing): boolean =>
  s.state === "completed" || s.state === "failed" || s.state === "canceled";
