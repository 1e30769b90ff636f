import type { Page, StateRecord, StateStore, WriteOp } from "../ports/state-store.ts";

/**
 * The request index: one line per request (a message sent to be planned), newest first, kept
 * twice: in the tenant's list (what its admins see) and in the list of whoever sent it (what a
 * person sees of their own). The console's list of requests reads it a page at a time; the state
 * of each request is read from its root task, never copied here (nothing to keep in step).
 *
 * Written by submit in the one transaction that records the plan marker (engine/steps/submit.ts),
 * so a request is listed exactly when it is to be planned: a retry of the same submit writes
 * neither again. Records are `request#<scope>#<newest-first time>#<message id>`, their parent the
 * list they are in; the state store's parent index returns them in key order, which is newest
 * first. Requests sent before the index existed are not listed (their conversations still are,
 * under GET /v1/resources/<tenant>/children).
 *
 *   await state.transact([...marker, ...requestIndexOps(entry)]);
 *   const page = await requestPage(state, { tenant: "acme", actor: "user_ada", limit: 25 });
 */
export const REQUEST_KIND = "request";

export interface RequestEntry {
  tenant: string;
  /** The root task; its parent is the message, the message's the conversation. */
  rootTaskId: string;
  /** Who sent it (the actor id the channel authenticated). */
  actor: string;
  /** Their name, when they have one (their key's, the chat settings'). */
  actorName?: string;
  /** Their capabilities when they sent it (their roles, from the same). */
  actorCapabilities?: string[];
  /** ISO 8601, when it was accepted. */
  at: string;
  /** The request's first characters, for the list (the message keeps the whole text). */
  text: string;
  mode: "eager" | "lazy";
}

/**
 * How much of a request's text its line keeps: what a list shows of it. A line is written twice
 * on every request's way in, so it holds nothing that can be derived (the message's and the
 * conversation's URNs are the root task's parents; the tenant is in them).
 */
export const REQUEST_TEXT_CHARS = 120;

type StoredLine = Omit<RequestEntry, "tenant">;

/** Milliseconds after which the newest-first order would wrap (the year 2286). */
const LAST_MS = 9_999_999_999_999;

const tenantList = (tenant: string) => `requests#${tenant}`;
const actorList = (tenant: string, actor: string) => `requests#${tenant}#${actor}`;

/** The puts that list a request (expected version 0: a request is listed once). */
export function requestIndexOps(entry: RequestEntry): WriteOp[] {
  const order = `${String(LAST_MS - Date.parse(entry.at)).padStart(13, "0")}#${messageId(entry.rootTaskId)}`;
  const { tenant: _, ...line } = entry;
  const data: StoredLine = { ...line, text: entry.text.slice(0, REQUEST_TEXT_CHARS) };
  return [tenantList(entry.tenant), actorList(entry.tenant, entry.actor)].map((list) => ({
    op: "put" as const,
    record: {
      key: `request#${list.slice("requests#".length)}#${order}`,
      kind: REQUEST_KIND,
      parent: list,
      updatedAt: entry.at,
      data,
    },
    expectedVersion: 0,
  }));
}

/**
 * A page of the tenant's requests (or only `actor`'s), newest first; `cursor` from the page before.
 */
export async function requestPage(
  state: StateStore,
  options: { tenant: string; actor?: string; limit: number; cursor?: string },
): Promise<Page<RequestEntry>> {
  const list =
    options.actor === undefined ? tenantList(options.tenant) : actorList(options.tenant, options.actor);
  const page = await state.byParent<StoredLine>(list, {
    limit: options.limit,
    ...(options.cursor ? { cursor: options.cursor } : {}),
  });
  return {
    items: page.items.map((r: StateRecord<StoredLine>) => ({ ...r.data, tenant: options.tenant })),
    ...(page.cursor ? { cursor: page.cursor } : {}),
  };
}

/** The message's id, from the root task's URN (`.../common.Message.<id>/plan.Task.<hash>`). */
const messageId = (rootTaskId: string) =>
  /common\.Message\.([^/]+)\/[^/]+$/.exec(rootTaskId)?.[1] ?? rootTaskId;
