import { ValidationError } from "../kernel/errors.ts";
import type { LoggedEvent, StateStore } from "../ports/state-store.ts";

/**
 * Projections of the global event log (StateStore.readAll): a state folded from the events, kept
 * with the position it has read to in one record, so a projection goes on where it stopped (after
 * a restart, in another process) and never applies an event twice. Each save is on the record's
 * version: of two workers advancing one projection from the same point, the second's save
 * conflicts (ConflictError) and nothing of it is kept; it reads the projection again and goes on.
 *
 *   const p = await advanceProjection(state, "events-by-type", {}, (counts, e) => ({ ...counts, [e.type]: (counts[e.type] ?? 0) + 1 }));
 */
export const PROJECTION_KIND = "projection";
export const projectionKey = (name: string) => `projection#${name}`;

export interface Projection<S> {
  name: string;
  /** The position of the last event applied; absent: none yet (the log's start). */
  cursor?: string;
  state: S;
  /** The record's version: what a save expects (0 for one never saved). */
  version: number;
}

const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

function checkName(name: string): void {
  if (!NAME.test(name))
    throw new ValidationError(`Invalid projection name ${JSON.stringify(name.slice(0, 100))}`, [
      "1 to 64 of a-z, 0-9 and -, starting with a letter or digit, e.g. events-by-type",
    ]);
}

/** The projection as saved, or `initial` at the log's start when it never was. */
export async function getProjection<S>(state: StateStore, name: string, initial: S): Promise<Projection<S>> {
  checkName(name);
  const record = await state.get<{ cursor?: string; state: S }>(projectionKey(name));
  if (!record) return { name, state: initial, version: 0 };
  return {
    name,
    state: record.data.state,
    version: record.version,
    ...(record.data.cursor === undefined ? {} : { cursor: record.data.cursor }),
  };
}

/** Saves `projection` over the version it was read at; ConflictError when another save came first. */
export async function saveProjection<S>(
  state: StateStore,
  projection: Projection<S>,
  updatedAt = new Date().toISOString(),
): Promise<Projection<S>> {
  checkName(projection.name);
  const data = {
    state: projection.state,
    ...(projection.cursor === undefined ? {} : { cursor: projection.cursor }),
  };
  await state.transact([
    {
      op: "put",
      record: { key: projectionKey(projection.name), kind: PROJECTION_KIND, updatedAt, data },
      expectedVersion: projection.version,
    },
  ]);
  return { ...projection, version: projection.version + 1 };
}

/**
 * Applies the next page of the log (at most `limit` events) to the projection and saves it with
 * its new position; `applied` is 0 when there was nothing new. Call it again while it applies.
 */
export async function advanceProjection<S>(
  state: StateStore,
  name: string,
  initial: S,
  apply: (state: S, event: LoggedEvent) => S,
  options: { limit?: number } = {},
): Promise<{ projection: Projection<S>; applied: number }> {
  const projection = await getProjection(state, name, initial);
  const page = await state.readAll({
    ...(projection.cursor === undefined ? {} : { from: projection.cursor }),
    ...(options.limit === undefined ? {} : { limit: options.limit }),
  });
  if (page.events.length === 0) return { projection, applied: 0 };
  const folded = page.events.reduce(apply, projection.state);
  const saved = await saveProjection(state, {
    ...projection,
    state: folded,
    ...(page.next === undefined ? {} : { cursor: page.next }),
  });
  return { projection: saved, applied: page.events.length };
}
