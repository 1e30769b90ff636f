import type { Conversation, Message } from "../domain/resources.ts";
import { lastElement, parentUrn, qualifiedType } from "../domain/urn.ts";
import { ConflictError } from "../kernel/errors.ts";
import type { Embedder } from "../ports/embeddings.ts";
import type { LoggedEvent, StateStore } from "../ports/state-store.ts";
import type { VectorIndex, VectorRecord } from "../ports/vector-index.ts";
import { getProjection, saveProjection } from "../store/projections.ts";
import type { ResourceStore } from "../store/resource-store.ts";

/**
 * The tenant's tasks, questions, requests and conversations made searchable by meaning
 * (search_resources' `plan.Task`, `uip.Interaction`, `common.Message` and `common.Conversation`
 * kinds), indexed from the global event log behind a projection's cursor:
 *   - a task by its title and intent as TaskCreated recorded them;
 *   - a question by its title and description;
 *   - a request (the person's message a root task was planned from: its TaskCreated has no parent
 *     task) by its text, read once its root task is recorded; its match names its conversation;
 *   - a conversation by its title and its latest request planned: what it is about now (each of
 *     its requests is found on its own as well).
 * A task's output is indexed when the task ends (engine/steps/outcome.ts `indexOutput`), its match
 * naming the task: a leaf's context takes those only, never other people's requests.
 *
 * Off every request's path: the watchdog runs it (locally with `arbor serve`'s, on AWS its
 * scheduled function), a page of the log at a time, one batched read of the requests, one
 * embedding call and one index write a page; so what was planned in the last watchdog period is not
 * found yet. A crash between the index write and the cursor's save indexes the page again (the same
 * keys: the same records); two runs at once: the second's save conflicts and it stops (the first's
 * cursor stands). A request deleted before its page is read is left out.
 */
export const RESOURCE_INDEX = "resource-index";
export const INDEXED_KINDS = [
  "plan.Task",
  "uip.Interaction",
  "common.Message",
  "common.Conversation",
] as const;
/** Events read a page; pages a run. */
const PAGE = 200;
const PAGES = 10;

export interface ResourceIndexDeps {
  state: StateStore;
  resources: ResourceStore;
  embedder: Embedder;
  index: VectorIndex;
  clock: () => Date;
}

interface Entry {
  key: string;
  type: (typeof INDEXED_KINDS)[number];
  text: string;
  metadata?: Record<string, string>;
}

/** Most of a text embedded: the embedders' inputs are bounded. */
const EMBEDDED_CHARS = 8_000;
/** How much of a conversation's title or latest request its match carries. */
const ABOUT_CHARS = 200;

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

/** The message a root task was planned from (its TaskCreated names no parent task), or undefined. */
function requestOf(event: LoggedEvent): string | undefined {
  if (event.type !== "TaskCreated" || event.payload.parentTaskId !== undefined) return undefined;
  const parent = parentUrn(event.payload.taskId);
  return parent && qualifiedType(lastElement(parent)) === "common.Message" ? parent : undefined;
}

/**
 * A page's entries by key, the last of a key winning (an upsert takes each key once): its tasks and
 * questions from the events alone; its requests and their conversations read, in one batch.
 */
async function entriesOf(
  resources: ResourceStore,
  events: readonly LoggedEvent[],
): Promise<Map<string, Entry>> {
  const entries = new Map<string, Entry>();
  const requests: string[] = [];
  for (const event of events) {
    const entry = entryOf(event);
    if (entry) entries.set(entry.key, entry);
    const request = requestOf(event);
    if (request) requests.push(request);
  }
  if (requests.length === 0) return entries;
  const conversations = [...new Set(requests.map((m) => parentUrn(m) as string))];
  const read = await resources.getMany([...requests, ...conversations]);
  const byUrn = new Map(read.flatMap((r) => (r ? [[r.meta.id as string, r] as const] : [])));
  for (const urn of requests) {
    const message = byUrn.get(urn) as Message | undefined;
    if (message?.meta.type !== "common.Message" || message.role !== "user" || !message.content) continue;
    const conversationUrn = parentUrn(urn) as string;
    const conversation = byUrn.get(conversationUrn) as Conversation | undefined;
    entries.set(urn, {
      key: urn,
      type: "common.Message",
      text: message.content,
      metadata: { conversation: conversationUrn },
    });
    if (conversation?.meta.type !== "common.Conversation") continue;
    entries.set(conversationUrn, {
      key: conversationUrn,
      type: "common.Conversation",
      text: conversation.title ? `${conversation.title}\n${message.content}` : message.content,
      // What a search shows of it (its title, else its latest request's start): kept small.
      metadata: { about: (conversation.title ?? message.content).slice(0, ABOUT_CHARS) },
    });
  }
  return entries;
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
    const entries = [...(await entriesOf(deps.resources, read.events)).values()];
    if (entries.length > 0) {
      const vectors = await deps.embedder.embed(entries.map((e) => e.text.slice(0, EMBEDDED_CHARS)));
      const records: VectorRecord[] = entries.flatMap((e, i) => {
        const vector = vectors[i];
        return vector ? [{ key: e.key, vector, type: e.type, metadata: e.metadata ?? {} }] : [];
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
