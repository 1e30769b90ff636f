import { type Assistant, type Descriptors, toDescription } from "../../domain/resources.ts";
import { descendantPrefix, isWithin, rootUrn } from "../../domain/urn.ts";
import { inSpan } from "../../kernel/tracing.ts";
import type { EngineDeps } from "../context.ts";

/**
 * Election: each task gets the assistant whose description is most similar to the task's own
 * (cosine similarity of the compiled descriptors). The score and the runner-up are kept on the
 * task; below the threshold the fallback assistant takes it, or, with none configured, a person
 * is asked (an `assign_subtask` interaction).
 */
export interface Election {
  assistant: string;
  score: number;
  runnerUp?: { assistant: string; score: number };
}

export const ASSISTANT_TYPE = "common.Assistant";

/** Adds or refreshes an assistant in the vector index (call on every write of an assistant). */
export async function indexAssistants(
  deps: Pick<EngineDeps, "embedder" | "index">,
  assistants: readonly Assistant[],
): Promise<void> {
  if (assistants.length === 0) return;
  await deps.index.upsert(await assistantEntries(deps, assistants));
}

/** Elects an assistant for each task (one embedding call for all). Undefined where nobody fits. */
export async function elect(
  deps: EngineDeps,
  tasks: readonly (Descriptors & { id: string; name: string })[],
): Promise<(Election | undefined)[]> {
  if (tasks.length === 0) return [];
  return inSpan("elect", { attributes: { "arbor.election.tasks": tasks.length } }, async (span) => {
    const elected = await electAll(deps, tasks);
    span.set("arbor.election.unassigned", elected.filter((e) => !e).length);
    return elected;
  });
}

async function electAll(
  deps: EngineDeps,
  tasks: readonly (Descriptors & { id: string; name: string })[],
): Promise<(Election | undefined)[]> {
  const vectors = await deps.embedder.embed(tasks.map((t) => toDescription(t) || t.name));
  const { electionThreshold } = deps.settings;
  const fallbackAssistant = await usableFallback(deps, tasks[0]?.id);
  return Promise.all(
    tasks.map(async (t, i) => {
      const matches = await deps.index.query({
        vector: vectors[i] as Float32Array,
        topK: 2,
        type: ASSISTANT_TYPE,
        keyPrefix: descendantPrefix(rootUrn(t.id)),
      });
      const [best, second] = matches;
      const runnerUp = second ? { runnerUp: { assistant: second.key, score: round(second.score) } } : {};
      if (best && best.score >= electionThreshold)
        return { assistant: best.key, score: round(best.score), ...runnerUp };
      if (fallbackAssistant)
        return { assistant: fallbackAssistant, score: round(best?.score ?? 0), ...runnerUp };
      return undefined;
    }),
  );
}

const round = (n: number) => Math.round(n * 1e4) / 1e4;

/**
 * The configured fallback assistant, when it can take a task of the tenant `taskId` is in: of
 * that tenant, stored, and not retired (a team applied without it has retired or never had it;
 * then, as without a fallback, a person is asked).
 */
async function usableFallback(deps: EngineDeps, taskId: string | undefined): Promise<string | undefined> {
  const fallback = deps.settings.fallbackAssistant;
  if (!fallback || !taskId || !isWithin(fallback, rootUrn(taskId))) return undefined;
  const assistant = await deps.resources.getAs("common.Assistant", fallback);
  return assistant && assistant.retiredAt === undefined ? fallback : undefined;
}

/** The index entries of assistants: each one's description, embedded (no write yet). */
export async function assistantEntries(
  deps: Pick<EngineDeps, "embedder">,
  assistants: readonly Pick<Assistant, "meta">[],
) {
  const vectors = await deps.embedder.embed(assistants.map((a) => toDescription(a.meta) || a.meta.name));
  return assistants.map((a, i) => ({
    key: a.meta.id,
    vector: vectors[i] as Float32Array,
    type: ASSISTANT_TYPE,
    metadata: { name: a.meta.name },
  }));
}
