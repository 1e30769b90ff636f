import { lastElement, qualifiedType } from "../../../domain/urn.ts";
import type { Asker, Engine } from "../../../engine/engine.ts";

/**
 * `watch <task URN>`: the request a task belongs to, for a person who may read it. How to drive it:
 *
 *   const root = await rootOf(engine, "cld:common.Tenant.acme/.../plan.Task.x", asker);
 *   if (root) await notify.subscribe(root, thread);
 *
 * Undefined when the URN is not a task, is not there, or the person may not read it (told alike).
 * A subtask's URN leads to the request at the top of its tree.
 */
const MAX_DEPTH = 50;

export async function rootOf(engine: Engine, taskUrn: string, asker: Asker): Promise<string | undefined> {
  let type: string | undefined;
  try {
    type = qualifiedType(lastElement(taskUrn));
  } catch {
    return undefined;
  }
  if (type !== "plan.Task") return undefined;
  if (!(await engine.mayRead(taskUrn, asker))) return undefined;
  const { view } = await engine.result(taskUrn, asker);
  if (!view) return undefined;
  let current = view;
  for (let depth = 0; current.parentTaskId && depth < MAX_DEPTH; depth++) {
    const parent = await engine.deps.tasks.view(current.parentTaskId);
    if (!parent) break;
    current = parent;
  }
  return current.taskId;
}
