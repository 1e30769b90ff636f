import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { DomainEvent, StoredEvent } from "../../domain/events.ts";
import type { AddOp, StateRecord } from "../../ports/state-store.ts";
import { storedEvent } from "../shared/state-store-helpers.ts";
import {
  LOG_SHARDS,
  logPartition,
  logSortKey,
  STATUS_SHARDS,
  STREAM_SHARDS,
  statusPartition,
  TTL_ATTRIBUTE,
} from "./dynamo-schema.ts";

/**
 * The state table's items and what they mean (the layout is in dynamo-schema.ts): a record, a
 * counter record, an event and an event id's guard, each to an item and back, and the conditions
 * that guard a record's version. Pure: no call to DynamoDB (dynamo-state-store.ts makes them).
 */
export type Item = Record<string, AttributeValue>;

export const recordKey = (key: string) => ({ pk: { S: `R#${key}` }, sk: { S: "R" } });
export const eventKey = (streamId: string, seq: number) => ({
  pk: { S: `S#${streamId}` },
  sk: { S: `E#${String(seq).padStart(12, "0")}` },
});
export const guardKey = (eventId: string) => ({ pk: { S: `I#${eventId}` }, sk: { S: "I" } });
/**
 * FNV-1a: spreads ids that differ in one character over every shard (a multiply-by-31 hash taken
 * modulo a power of two does not: 31 is -1 there, so "leaf12" and "leaf23" land together).
 * Queries cover every shard, so the shard an item was written to never needs to be found again.
 */
export const shardOf = (id: string, shards = STREAM_SHARDS): number => {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193) >>> 0;
  return h % shards;
};

export function versionCondition(expected: number) {
  return expected === 0
    ? { ConditionExpression: "attribute_not_exists(pk)" }
    : { ConditionExpression: "version = :v", ExpressionAttributeValues: { ":v": { N: String(expected) } } };
}

export const statusSortKey = (r: { updatedAt: string; key: string }) => `${r.updatedAt}#${r.key}`;
/** DynamoDB's TTL reads epoch seconds; rounded up, so nothing goes before its time. */
export const epochSeconds = (ms: number): string => String(Math.ceil(ms / 1000));

export function recordItem(r: Omit<StateRecord, "version">, version: number): Item {
  const item: Item = {
    ...recordKey(r.key),
    key: { S: r.key },
    kind: { S: r.kind },
    version: { N: String(version) },
    updatedAt: { S: r.updatedAt },
    data: { S: JSON.stringify(r.data) },
  };
  if (r.expiresAt !== undefined) item[TTL_ATTRIBUTE] = { N: epochSeconds(Date.parse(r.expiresAt)) };
  if (r.parent !== undefined)
    Object.assign(item, { parent: { S: r.parent }, gsi1pk: { S: r.parent }, gsi1sk: { S: r.key } });
  if (r.status !== undefined) {
    Object.assign(item, {
      status: { S: r.status },
      gsi2pk: { S: statusPartition(r.kind, r.status, shardOf(r.key, STATUS_SHARDS)) },
      gsi2sk: { S: statusSortKey(r) },
    });
  }
  return item;
}

/**
 * A counter record keeps each field as a number attribute `n_<field>`, so that ADD can update it
 * in place (a JSON `data` string cannot be added to); `data` must not exist (not a put record).
 */
export function counterUpdate(op: AddOp) {
  const names: Record<string, string> = {
    "#key": "key",
    "#kind": "kind",
    "#updatedAt": "updatedAt",
    "#version": "version",
    "#data": "data",
  };
  const values: Item = {
    ":key": { S: op.key },
    ":kind": { S: op.kind },
    ":u": { S: op.updatedAt },
    ":one": { N: "1" },
  };
  const sets = ["#key = :key", "#kind = :kind", "#updatedAt = :u"];
  if (op.parent !== undefined) {
    Object.assign(names, { "#parent": "parent", "#g1pk": "gsi1pk", "#g1sk": "gsi1sk" });
    values[":parent"] = { S: op.parent };
    sets.push("#parent = :parent", "#g1pk = :parent", "#g1sk = :key");
  }
  const adds = ["#version :one"];
  Object.entries(op.amounts).forEach(([field, amount], i) => {
    names[`#n${i}`] = `${COUNTER_PREFIX}${field}`;
    values[`:n${i}`] = { N: decimal(amount) };
    adds.push(`#n${i} :n${i}`);
  });
  return {
    UpdateExpression: `SET ${sets.join(", ")} ADD ${adds.join(", ")}`,
    ConditionExpression: "attribute_not_exists(#data)",
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
  };
}

const COUNTER_PREFIX = "n_";

/** A number as DynamoDB takes it: plain decimal digits (JavaScript writes 1e-7 for small ones). */
const decimal = (n: number): string => (/e/i.test(String(n)) ? n.toFixed(20) : String(n));

export function eventItem(e: StoredEvent): Item {
  const { streamId, seq, recordedAt, ...event } = e;
  const item: Item = {
    ...eventKey(streamId, seq),
    ...marshall({ streamId, seq, recordedAt, eventId: e.id, body: JSON.stringify(event) }),
  };
  if (seq === 1)
    Object.assign(item, { gsi3pk: { S: `STREAM#${shardOf(streamId)}` }, gsi3sk: { S: streamId } });
  Object.assign(item, {
    gsi4pk: { S: logPartition(recordedAt.slice(0, 7), shardOf(e.id, LOG_SHARDS)) },
    gsi4sk: { S: logSortKey(recordedAt, seq, e.id) },
  });
  return item;
}

export function toRecord<T>(item: Item): StateRecord<T> {
  const raw = unmarshall(item) as {
    key: string;
    kind: string;
    parent?: string;
    status?: string;
    version: number;
    updatedAt: string;
    data?: string;
    expiresAt?: number;
  } & Record<string, unknown>;
  const counters = Object.fromEntries(
    Object.entries(raw)
      .filter(([name]) => name.startsWith(COUNTER_PREFIX))
      .map(([name, value]) => [name.slice(COUNTER_PREFIX.length), Number(value)]),
  );
  const rec: StateRecord<T> = {
    key: raw.key,
    kind: raw.kind,
    version: raw.version,
    updatedAt: raw.updatedAt,
    data: (raw.data === undefined ? counters : JSON.parse(raw.data)) as T,
  };
  if (raw.parent !== undefined) rec.parent = raw.parent;
  if (raw.status !== undefined) rec.status = raw.status;
  if (raw.expiresAt !== undefined) rec.expiresAt = new Date(raw.expiresAt * 1000).toISOString();
  return rec;
}

export function toStoredEvent(item: Item): StoredEvent {
  const raw = unmarshall(item) as { streamId: string; seq: number; recordedAt: string; body: string };
  return storedEvent(JSON.parse(raw.body) as DomainEvent, raw.streamId, raw.seq, raw.recordedAt);
}
