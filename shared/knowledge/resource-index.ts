import { ConflictError } from "../kernel/errors.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { LoggedEvent, StateStore } from "../ports/state-store.ts";
import type { VectorIndex, VectorRecord } from "../ports/vector-index.ts";
import { getProjection, saveProjection } from "../store/projections.ts";

/**
 * The tenant's tasks and questions made searchable by meaning (search_resources' `plan.Task` and
 * `uip.Interaction` kinds), indexed from the global event log behind a projection's cursor: a
 * task by its title and intent as TaskCreated recorded them, a question by its title and
 * description. Off every request's path: the watchdog runs it (locally with `arbor serve`'s, on
 * AWS its scheduled function), a page of the log at a time, one embedding call and one index write
 * a page; so what was planned in the last watchdog period is not found yet. A crash between the
 * index write and the cursor's save indexes the page again (the same keys: the same records); two
 * runs at once: the second's save conflicts and it stops (the first's cursor stands).
 */
export const RESOURCE_INDEX = "resource-index";
export const INDEXED_KINDS = ["plan.Task", "uip.Interaction"] as const;
/** Events read a page; pages a run. */
const PAGE = 200;
const PAGES = 10;

export interface ResourceIndexDeps {
  state: StateStore;
  embedder: Embedder;
  index: VectorIndex;
  clock: () => Date;
}

interface Entry {
  key: string;
  type: (typeof INDEXED_KINDS)[number];
  text: string;
}

function entryOf(event: LoggedEvent): Entry | undefined {
  if (event.type === "TaskCreated") {
    const { taskId, title, intent } = event.payload;
    return {
      key: taskId,
      type: "plan.Task",
      text: intent && intent !== title ? `${title}\n${intent}` : title,
    };
  }
  if (event.type === "UserInteractionRequested") {
    const { interactionId, display } = event.payload;
    return {
      key: interactionId,
      type: "uip.Interaction",
      text: display.description ? `${display.title}\n${display.description}` : display.title,
    };
  }
  return undefined;
}

/** Indexes what the log recorded since the cursor, up to PAGES pages; answers how many it indexed. */
export async function indexRecorded(deps: ResourceIndexDeps): Promise<number> {
  let indexed = 0;
  for (let page = 0; page < PAGES; page++) {
    const projection = await getProjection(deps.state, RESOURCE_INDEX, { indexed: 0 });
    const read = await deps.state.readAll({
      ...(projection.cursor === undefined ? {} : { from: projection.cursor }),
      limit: PAGE,
    });
    if (read.events.length === 0) break;
    // The last record of a key wins within a page (an upsert takes each key once).
    const entries = [
      ...new Map(
        read.events.flatMap((e) => {
          const entry = entryOf(e);
          return entry ? [[entry.key, entry] as const] : [];
        }),
      ).values(),
    ];
    if (entries.length > 0) {
      const vectors = await deps.embedder.embed(entries.map((e) => e.text.slice(0, 8_000)));
      const records: VectorRecord[] = entries.flatMap((e, i) => {
        const vector = vectors[i];
        return vector ? [{ key: e.key, vector, type: e.type, metadata: {} }] : [];
      });
      await deps.index.upsert(records);
    }
    try {
      await saveProjection(
        deps.state,
        {
          ...projection,
          state: { indexed: projection.state.indexed + entries.length },
          ...(read.next === undefined ? {} : { cursor: read.next }),
        },
        deps.clock().toISOString(),
      );
    } catch (error) {
      if (error instanceof ConflictError) break; // another run moved the cursor: it goes on
      throw error;
    }
    indexed += entries.length;
    if (read.events.length < PAGE) break;
  }
  return indexed;
}
