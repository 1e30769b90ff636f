import type { DomainEvent, StoredEvent } from "../../domain/events.ts";
import { validateEvent } from "../../domain/events.ts";
import { ConflictError, TooLargeError, ValidationError } from "../../kernel/errors.ts";
import type { Page, QueryOptions, TransactResult, WriteOp } from "../../ports/state-store.ts";

/** Logic every StateStore adapter shares: validation, duplicate detection, cursors, paging. */

export function storedEvent(
  event: DomainEvent,
  streamId: string,
  seq: number,
  recordedAt: string,
): StoredEvent {
  return { ...event, streamId, seq, recordedAt };
}

/**
 * Limits every adapter enforces, so that what works locally also works on DynamoDB: at most 100
 * items per transaction (a record put/delete is 1, an event is 2: the event and its id guard, an
 * append at an explicit version adds 1 check) and at most 350 KB per record or event.
 */
export const MAX_TRANSACTION_ITEMS = 100;
export const MAX_ITEM_BYTES = 350_000;

const COUNTER_FIELD = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** A counter record's data plus the amounts, field by field. */
export function addAmounts(
  current: Readonly<Record<string, number>> | undefined,
  amounts: Readonly<Record<string, number>>,
): Record<string, number> {
  const next: Record<string, number> = { ...current };
  for (const [field, amount] of Object.entries(amounts)) next[field] = (next[field] ?? 0) + amount;
  return next;
}

export function transactionItems(ops: readonly WriteOp[]): number {
  let n = 0;
  for (const op of ops) {
    if (op.op === "append")
      n += op.events.length * 2 + (typeof op.expectedVersion === "number" && op.expectedVersion > 0 ? 1 : 0);
    else n += 1;
  }
  return n;
}

/**
 * A validated op with the JSON that validation measured (a put's data, an append's events), for
 * an adapter that stores JSON to use instead of serialising the same values again.
 */
export type ValidatedOp =
  | (Extract<WriteOp, { op: "put" }> & { dataJson: string })
  | Extract<WriteOp, { op: "delete" | "add" }>
  | (Extract<WriteOp, { op: "append" }> & { eventsJson: string[] });

/** Validates every op (and every event of every append) before anything is written. */
export function validateOps(ops: readonly WriteOp[]): ValidatedOp[] {
  if (ops.length === 0) throw new ValidationError("A transaction needs at least one operation");
  const items = transactionItems(ops);
  if (items > MAX_TRANSACTION_ITEMS) {
    throw new TooLargeError(
      `A transaction may write at most ${MAX_TRANSACTION_ITEMS} items; this one needs ${items}: split it (an event counts 2)`,
      { items },
    );
  }
  const keys = new Set<string>();
  return ops.map((op) => {
    if (op.op === "add") {
      if (!op.key) throw new ValidationError("A record needs a key");
      if (keys.has(op.key)) throw new ValidationError(`A transaction may touch record ${op.key} only once`);
      keys.add(op.key);
      const fields = Object.entries(op.amounts);
      if (fields.length === 0) throw new ValidationError(`Add to ${op.key} has no amounts`);
      for (const [field, amount] of fields) {
        if (!COUNTER_FIELD.test(field))
          throw new ValidationError(
            `Counter field "${field}" of ${op.key}: use a letter, then letters, digits or _`,
          );
        if (!Number.isFinite(amount))
          throw new ValidationError(`Counter field "${field}" of ${op.key} must be a finite number`);
      }
      return op;
    }
    if (op.op === "put" || op.op === "delete") {
      const key = op.op === "put" ? op.record.key : op.key;
      if (!key) throw new ValidationError("A record needs a key");
      if (keys.has(key)) throw new ValidationError(`A transaction may touch record ${key} only once`);
      keys.add(key);
      if (!Number.isInteger(op.expectedVersion) || op.expectedVersion < 0) {
        throw new ValidationError(`expectedVersion for ${key} must be a whole number >= 0`);
      }
      if (op.op === "delete") return op;
      const expiresAt = op.record.expiresAt;
      if (expiresAt !== undefined && Number.isNaN(Date.parse(expiresAt)))
        throw new ValidationError(`expiresAt of ${key} must be an ISO 8601 time, not "${expiresAt}"`);
      const dataJson = JSON.stringify(op.record.data) ?? "null";
      assertItemSize(`record ${key}`, dataJson);
      return { ...op, dataJson };
    }
    if (op.events.length === 0) throw new ValidationError(`Append to ${op.streamId} has no events`);
    const events = op.events.map((e) => validateEvent(e));
    const ids = new Set(events.map((e) => e.id));
    if (ids.size !== events.length) throw new ValidationError(`Append to ${op.streamId} repeats an event id`);
    const eventsJson = events.map((e) => JSON.stringify(e));
    events.forEach((e, i) => {
      assertItemSize(`event ${e.id}`, eventsJson[i]);
    });
    return { ...op, events, eventsJson };
  });
}

function assertItemSize(what: string, json: string | undefined): void {
  const text = json ?? "";
  if (text.length * 3 <= MAX_ITEM_BYTES) return; // no UTF-16 unit takes more than 3 bytes in UTF-8
  const size = Buffer.byteLength(text);
  if (size > MAX_ITEM_BYTES) {
    throw new TooLargeError(
      `${what} is ${size} bytes, over ${MAX_ITEM_BYTES}: store large content as a resource and keep its URN`,
      {
        size,
      },
    );
  }
}

export const eventIdsOf = (ops: readonly WriteOp[]): string[] =>
  ops.flatMap((op) => (op.op === "append" ? op.events.map((e) => e.id) : []));

/**
 * Given the already-recorded events among a transaction's event ids: undefined when none were
 * recorded (go ahead); a duplicate result when some append was recorded in full before (the
 * transaction already happened, write nothing); ConflictError when an append was recorded only
 * in part or into another stream (ids reused for different events).
 */
export function classifyDuplicates(
  ops: readonly WriteOp[],
  found: readonly StoredEvent[],
): TransactResult | undefined {
  if (found.length === 0) return undefined;
  const byId = new Map(found.map((e) => [e.id, e]));
  const appended: StoredEvent[][] = [];
  let complete = false;
  for (const op of ops) {
    if (op.op !== "append") continue;
    const hits = op.events.map((e) => byId.get(e.id));
    const recorded = hits.filter((h): h is StoredEvent => h !== undefined);
    if (recorded.some((h) => h.streamId !== op.streamId)) {
      throw new ConflictError(`Event ids appended to ${op.streamId} are already recorded in another stream`, {
        streamId: op.streamId,
      });
    }
    if (recorded.length > 0 && recorded.length < hits.length) {
      throw new ConflictError(`Only some of the events appended to ${op.streamId} were recorded before`, {
        streamId: op.streamId,
      });
    }
    if (recorded.length === hits.length) complete = true;
    appended.push(recorded.sort((a, b) => a.seq - b.seq));
  }
  if (!complete) return undefined;
  return { duplicate: true, appended };
}

export function versionConflict(
  what: "record" | "stream",
  id: string,
  expected: number | "any",
  actual: number | undefined,
  opIndex: number,
): ConflictError {
  const at = actual === undefined ? "a newer version" : `version ${actual}`;
  return new ConflictError(`The ${what} ${id} is at ${at}, not ${expected}: re-read it and try again`, {
    what,
    id,
    expected,
    actual,
    opIndex,
  });
}

export const encodeCursor = (parts: readonly string[]): string =>
  Buffer.from(JSON.stringify(parts)).toString("base64url");

export function decodeCursor(cursor: string): string[] {
  try {
    const parts: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString());
    if (Array.isArray(parts) && parts.every((p) => typeof p === "string")) return parts;
  } catch {
    // fall through
  }
  throw new ValidationError("Invalid cursor: pass back the cursor of the previous page unchanged");
}

export const pageSize = (o: QueryOptions): number => Math.max(1, Math.min(o.limit ?? 100, 1000));

/** Cuts `limit + 1` rows to a page, with a cursor when there was one more. */
export function paged<T>(rows: T[], limit: number, cursorOf: (last: T) => string): Page<T> {
  if (rows.length <= limit) return { items: rows };
  const items = rows.slice(0, limit);
  return { items, cursor: cursorOf(items[items.length - 1] as T) };
}

/** A record's `expiresAt` as both stores keep it: to the second, rounded up (nothing goes before its time). */
export const expiryToTheSecond = (iso: string): string =>
  new Date(Math.ceil(Date.parse(iso) / 1000) * 1000).toISOString();
