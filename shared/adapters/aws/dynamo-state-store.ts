import { randomUUID } from "node:crypto";
import {
  BatchGetItemCommand,
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  type QueryCommandInput,
  ResourceNotFoundException,
  TransactionCanceledException,
  type TransactWriteItem,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import type { DomainEvent, StoredEvent } from "../../domain/events.ts";
import { RETENTION_MS } from "../../domain/retention.ts";
import { ConflictError, UnavailableError, ValidationError } from "../../kernel/errors.ts";
import {
  type EventLogPage,
  type ExpectedVersion,
  type LoggedEvent,
  logPageSize,
  type Page,
  type QueryOptions,
  type StateRecord,
  type StateStore,
  type TransactResult,
  type WriteOp,
} from "../../ports/state-store.ts";
import {
  classifyDuplicates,
  decodeCursor,
  encodeCursor,
  eventIdsOf,
  paged,
  pageSize,
  storedEvent,
  validateOps,
  versionConflict,
} from "../shared/state-store-helpers.ts";
import {
  counterUpdate,
  epochSeconds,
  eventItem,
  eventKey,
  guardKey,
  type Item,
  recordItem,
  recordKey,
  statusSortKey,
  toRecord,
  toStoredEvent,
  versionCondition,
} from "./dynamo-item-codec.ts";
import {
  ALL_GSIS,
  GSI,
  LOG_EPOCH,
  LOG_SETTLE_MS,
  LOG_SHARDS,
  logPartition,
  STATUS_SHARDS,
  STREAM_SHARDS,
  statusPartition,
  TABLE_KEYS,
  TTL_ATTRIBUTE,
} from "./dynamo-schema.ts";

/**
 * State store + event log on one DynamoDB table (layout in dynamo-schema.ts). Every write is a
 * TransactWriteItems with conditions: records carry a version; stream positions are items that
 * may not exist yet; each event id has a guard item, so an event is recorded once however often
 * it is appended.
 */
export interface DynamoStateStoreOptions {
  client: DynamoDBClient;
  tableName: string;
  clock?: () => Date;
  /** Attempts when DynamoDB reports a transaction conflict or `"any"` loses a race (default 10). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  /** How old an event must be before readAll gives it (default LOG_SETTLE_MS, dynamo-schema.ts). */
  logSettleMs?: number;
}

export class DynamoStateStore implements StateStore {
  readonly #db: DynamoDBClient;
  readonly #table: string;
  readonly #clock: () => Date;
  readonly #maxAttempts: number;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #logSettleMs: number;

  constructor(options: DynamoStateStoreOptions) {
    this.#db = options.client;
    this.#table = options.tableName;
    this.#clock = options.clock ?? (() => new Date());
    this.#maxAttempts = options.maxAttempts ?? 10;
    this.#sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.#logSettleMs = options.logSettleMs ?? LOG_SETTLE_MS;
  }

  /** Creates the table when it does not exist (DynamoDB Local, tests). On AWS, the CDK stack owns it. */
  static async ensureTable(client: DynamoDBClient, tableName: string): Promise<void> {
    try {
      await client.send(new DescribeTableCommand({ TableName: tableName }));
      return;
    } catch (e) {
      if (!(e instanceof ResourceNotFoundException)) throw e;
    }
    const attrs = new Set<string>([TABLE_KEYS.partitionKey, TABLE_KEYS.sortKey]);
    for (const g of ALL_GSIS) attrs.add(g.partitionKey).add(g.sortKey);
    await client.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [...attrs].map((AttributeName) => ({ AttributeName, AttributeType: "S" })),
        KeySchema: [
          { AttributeName: TABLE_KEYS.partitionKey, KeyType: "HASH" },
          { AttributeName: TABLE_KEYS.sortKey, KeyType: "RANGE" },
        ],
        GlobalSecondaryIndexes: ALL_GSIS.map((g) => ({
          IndexName: g.name,
          KeySchema: [
            { AttributeName: g.partitionKey, KeyType: "HASH" },
            { AttributeName: g.sortKey, KeyType: "RANGE" },
          ],
          Projection:
            g.projection === "ALL"
              ? { ProjectionType: "ALL" }
              : { ProjectionType: "INCLUDE", NonKeyAttributes: [...g.projection] },
        })),
      }),
    );
  }

  async get<T>(key: string): Promise<StateRecord<T> | undefined> {
    const out = await this.#call(() =>
      this.#db.send(
        new GetItemCommand({ TableName: this.#table, Key: recordKey(key), ConsistentRead: true }),
      ),
    );
    return out.Item ? toRecord<T>(out.Item) : undefined;
  }

  append(
    streamId: string,
    events: readonly DomainEvent[],
    expectedVersion: ExpectedVersion,
  ): Promise<TransactResult> {
    return this.transact([{ op: "append", streamId, events, expectedVersion }]);
  }

  async transact(ops: readonly WriteOp[]): Promise<TransactResult> {
    const validated = validateOps(ops);
    for (let attempt = 1; ; attempt++) {
      const plan = await this.#plan(validated, this.#clock().toISOString());
      try {
        await this.#db.send(
          new TransactWriteItemsCommand({ TransactItems: plan.items, ClientRequestToken: randomUUID() }),
        );
        return { duplicate: false, appended: plan.appended };
      } catch (e) {
        if (!(e instanceof TransactionCanceledException)) throw unavailable(e);
        const reasons = e.CancellationReasons ?? [];
        const lost = reasons.flatMap((r, i) =>
          r.Code === "ConditionalCheckFailed" && plan.owners[i] ? [plan.owners[i]] : [],
        );
        if (lost.some((o) => o.kind === "guard")) {
          // Some event id is already recorded: either this whole transaction happened before, or ids were reused.
          const dup = classifyDuplicates(validated, await this.#eventsById(eventIdsOf(validated)));
          if (dup) return dup;
        }
        const first = lost[0];
        const raced =
          first === undefined
            ? reasons.some((r) => r.Code === "TransactionConflict" || r.Code === "ThrottlingError")
            : lost.every((o) => o.kind === "stream" && isAnyAppend(validated[o.opIndex]));
        if (!raced || attempt >= this.#maxAttempts) {
          if (first) throw await this.#conflictFor(validated, first.opIndex);
          throw new ConflictError(
            "DynamoDB cancelled the transaction because of concurrent writes: try again",
            {
              reasons: reasons.map((r) => r.Code),
            },
          );
        }
        await this.#sleep(Math.random() * Math.min(200, 5 * 2 ** attempt));
      }
    }
  }

  /** Builds the transaction items, and for each item which op (and part) it belongs to. */
  async #plan(ops: readonly WriteOp[], recordedAt: string) {
    const items: TransactWriteItem[] = [];
    const owners: { opIndex: number; kind: "record" | "stream" | "guard" }[] = [];
    const appended: StoredEvent[][] = [];
    for (const [opIndex, op] of ops.entries()) {
      if (op.op === "put") {
        items.push({
          Put: {
            TableName: this.#table,
            Item: recordItem(op.record, op.expectedVersion + 1),
            ...versionCondition(op.expectedVersion),
          },
        });
        owners.push({ opIndex, kind: "record" });
      } else if (op.op === "add") {
        items.push({ Update: { TableName: this.#table, Key: recordKey(op.key), ...counterUpdate(op) } });
        owners.push({ opIndex, kind: "record" });
      } else if (op.op === "delete") {
        items.push({
          Delete: { TableName: this.#table, Key: recordKey(op.key), ...versionCondition(op.expectedVersion) },
        });
        owners.push({ opIndex, kind: "record" });
      } else {
        const base =
          op.expectedVersion === "any" ? await this.streamVersion(op.streamId) : op.expectedVersion;
        if (base > 0 && op.expectedVersion !== "any") {
          // The stream must be exactly at `base`: its event `base` exists (and `base + 1` must not, below).
          items.push({
            ConditionCheck: {
              TableName: this.#table,
              Key: eventKey(op.streamId, base),
              ConditionExpression: "attribute_exists(pk)",
            },
          });
          owners.push({ opIndex, kind: "stream" });
        }
        const stored = op.events.map((e, i) => storedEvent(e, op.streamId, base + 1 + i, recordedAt));
        for (const s of stored) {
          items.push({
            Put: {
              TableName: this.#table,
              Item: eventItem(s),
              ConditionExpression: "attribute_not_exists(pk)",
            },
          });
          owners.push({ opIndex, kind: "stream" });
          items.push({
            Put: {
              TableName: this.#table,
              Item: {
                ...guardKey(s.id),
                streamId: { S: s.streamId },
                seq: { N: String(s.seq) },
                // A guard outlives every redelivery of its event (domain/retention.ts); the event stays.
                [TTL_ATTRIBUTE]: {
                  N: epochSeconds(Date.parse(recordedAt) + RETENTION_MS.eventIdGuard),
                },
              },
              ConditionExpression: "attribute_not_exists(pk)",
            },
          });
          owners.push({ opIndex, kind: "guard" });
        }
        appended.push(stored);
      }
    }
    return { items, owners, appended };
  }

  async #conflictFor(ops: readonly WriteOp[], opIndex: number): Promise<ConflictError> {
    const op = ops[opIndex] as WriteOp;
    if (op.op === "append")
      return versionConflict(
        "stream",
        op.streamId,
        op.expectedVersion,
        await this.streamVersion(op.streamId),
        opIndex,
      );
    if (op.op === "add")
      return new ConflictError(
        `Record ${op.key} is not a counter record (it was put whole): it cannot be added to`,
        { opIndex },
      );
    const key = op.op === "put" ? op.record.key : op.key;
    return versionConflict("record", key, op.expectedVersion, (await this.get(key))?.version ?? 0, opIndex);
  }

  async #eventsById(ids: readonly string[]): Promise<StoredEvent[]> {
    const guards: Item[] = [];
    for (let i = 0; i < ids.length; i += 100) {
      let keys: Item[] | undefined = ids.slice(i, i + 100).map(guardKey);
      while (keys && keys.length > 0) {
        const out = await this.#call(() =>
          this.#db.send(
            new BatchGetItemCommand({
              RequestItems: { [this.#table]: { Keys: keys as Item[], ConsistentRead: true } },
            }),
          ),
        );
        guards.push(...(out.Responses?.[this.#table] ?? []));
        keys = out.UnprocessedKeys?.[this.#table]?.Keys as Item[] | undefined;
      }
    }
    const events = await Promise.all(
      guards.map(async (g) => {
        const out = await this.#call(() =>
          this.#db.send(
            new GetItemCommand({
              TableName: this.#table,
              Key: eventKey(String(g.streamId?.S), Number(g.seq?.N)),
              ConsistentRead: true,
            }),
          ),
        );
        return out.Item ? toStoredEvent(out.Item) : undefined;
      }),
    );
    return events.filter((e): e is StoredEvent => e !== undefined);
  }

  /**
   * The log index (dynamo-schema.ts), month by month from `from`'s (or LOG_EPOCH), each month's
   * shards read at once and merged, up to the settling horizon: what is younger than
   * `logSettleMs` waits for a later read.
   */
  async readAll(options: { from?: string; limit?: number } = {}): Promise<EventLogPage> {
    const limit = logPageSize(options.limit);
    const { from } = options;
    if (from !== undefined && !LOG_POSITION.test(from))
      throw new ValidationError(`Invalid log position ${JSON.stringify(from.slice(0, 100))}`, [
        "give a position a page of the log gave (its events' `position`, or its `next`)",
      ]);
    const horizon = new Date(this.#clock().getTime() - this.#logSettleMs).toISOString();
    const upTo = `${horizon}#\uffff`;
    const last = horizon.slice(0, 7);
    const events: LoggedEvent[] = [];
    for (let month = from?.slice(0, 7) ?? LOG_EPOCH; month <= last; month = nextMonth(month)) {
      const after = from !== undefined && from.slice(0, 7) === month ? from : undefined;
      const want = limit - events.length;
      const shards = await Promise.all(
        Array.from({ length: LOG_SHARDS }, (_, shard) =>
          this.#queryUpTo(
            {
              IndexName: GSI.log.name,
              KeyConditionExpression:
                after === undefined
                  ? "gsi4pk = :pk AND gsi4sk <= :to"
                  : "gsi4pk = :pk AND gsi4sk BETWEEN :from AND :to",
              ExpressionAttributeValues: {
                ":pk": { S: logPartition(month, shard) },
                ":to": { S: upTo },
                // Just after `from`: nothing sorts between a string and itself followed by U+0000.
                ...(after === undefined ? {} : { ":from": { S: `${after}\u0000` } }),
              },
            },
            want,
          ),
        ),
      );
      const merged = shards
        .flat()
        .map((item) => ({ ...toStoredEvent(item), position: String(item.gsi4sk?.S) }))
        .sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
      events.push(...merged.slice(0, want));
      if (events.length >= limit) break;
    }
    const next = events.at(-1)?.position ?? from;
    return next === undefined ? { events } : { events, next };
  }

  async readStream(
    streamId: string,
    options: { fromSeq?: number; limit?: number } = {},
  ): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    const want = options.limit ?? Number.POSITIVE_INFINITY;
    let start: Item | undefined;
    do {
      const page = await this.#query({
        KeyConditionExpression: "pk = :pk AND sk >= :from",
        ExpressionAttributeValues: {
          ":pk": { S: `S#${streamId}` },
          ":from": eventKey(streamId, options.fromSeq ?? 1).sk,
        },
        ConsistentRead: true,
        ...(Number.isFinite(want) ? { Limit: want - out.length } : {}),
        ...(start ? { ExclusiveStartKey: start } : {}),
      });
      out.push(...(page.Items ?? []).map(toStoredEvent));
      start = page.LastEvaluatedKey;
    } while (start && out.length < want);
    return out;
  }

  async streamVersion(streamId: string): Promise<number> {
    const page = await this.#query({
      KeyConditionExpression: "pk = :pk",
      ExpressionAttributeValues: { ":pk": { S: `S#${streamId}` } },
      ScanIndexForward: false,
      Limit: 1,
      ConsistentRead: true,
    });
    const top = page.Items?.[0];
    return top ? Number(top.seq?.N) : 0;
  }

  async listStreams(options: QueryOptions = {}): Promise<Page<string>> {
    const limit = pageSize(options);
    const [from, cursorAfter] =
      options.cursor === undefined ? ["0", undefined] : decodeCursor(options.cursor);
    let after: string | undefined = cursorAfter;
    const items: { shard: number; id: string }[] = [];
    for (let shard = Number(from); shard < STREAM_SHARDS; shard++, after = undefined) {
      const page = await this.#query({
        IndexName: GSI.streams.name,
        ...keyAfter("gsi3pk", `STREAM#${shard}`, "gsi3sk", after),
        Limit: limit + 1 - items.length,
      });
      for (const i of page.Items ?? []) items.push({ shard, id: String(i.streamId?.S) });
      if (items.length > limit) {
        const last = items[limit - 1] as { shard: number; id: string };
        return {
          items: items.slice(0, limit).map((i) => i.id),
          cursor: encodeCursor([String(last.shard), last.id]),
        };
      }
    }
    return { items: items.map((i) => i.id) };
  }

  async findEvent(eventId: string): Promise<StoredEvent | undefined> {
    return (await this.#eventsById([eventId]))[0];
  }

  async byParent<T>(parent: string, options: QueryOptions = {}): Promise<Page<StateRecord<T>>> {
    const limit = pageSize(options);
    const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor)[0];
    const page = await this.#query({
      IndexName: GSI.byParent.name,
      ...keyAfter("gsi1pk", parent, "gsi1sk", after),
      Limit: limit + 1,
    });
    return paged(
      (page.Items ?? []).map((i) => toRecord<T>(i)),
      limit,
      (last) => encodeCursor([last.key]),
    );
  }

  /**
   * The status index is spread over STATUS_SHARDS partitions per kind and status (and the one
   * partition of the layout before it, so records written then are still found until they are
   * written again): each is queried for the page, and the pages are merged, oldest first.
   */
  async byStatus<T>(
    kind: string,
    status: string,
    options: QueryOptions & { updatedBefore?: string } = {},
  ): Promise<Page<StateRecord<T>>> {
    const limit = pageSize(options);
    let after: string | undefined;
    if (options.cursor !== undefined) {
      const [key, updatedAt] = decodeCursor(options.cursor) as [string, string];
      after = statusSortKey({ key, updatedAt });
    }
    // Sort keys are `<updatedAt>#<key>`: one that starts with `updatedBefore` is not before it.
    const before = options.updatedBefore;
    if (after !== undefined && before !== undefined && after >= before) return { items: [] };
    const values: Item = {};
    let range = "";
    if (after !== undefined && before !== undefined) {
      // BETWEEN includes its bounds: the cursor's own record is dropped below; none equals `before`.
      range = " AND gsi2sk BETWEEN :after AND :before";
      Object.assign(values, { ":after": { S: after }, ":before": { S: before } });
    } else if (after !== undefined) {
      range = " AND gsi2sk > :after";
      values[":after"] = { S: after };
    } else if (before !== undefined) {
      range = " AND gsi2sk < :before";
      values[":before"] = { S: before };
    }
    const partitions = [
      ...Array.from({ length: STATUS_SHARDS }, (_, shard) => statusPartition(kind, status, shard)),
      statusPartition(kind, status),
    ];
    const pages = await Promise.all(
      partitions.map((p) =>
        this.#queryUpTo(
          {
            IndexName: GSI.byStatus.name,
            KeyConditionExpression: `gsi2pk = :p${range}`,
            ExpressionAttributeValues: { ...values, ":p": { S: p } },
          },
          limit + 1,
        ),
      ),
    );
    const merged = pages
      .flat()
      .filter((i) => i.gsi2sk?.S !== after)
      .sort((a, b) => compareKeys(a.gsi2sk?.S ?? "", b.gsi2sk?.S ?? ""))
      .slice(0, limit + 1);
    return paged(
      merged.map((i) => toRecord<T>(i)),
      limit,
      (last) => encodeCursor([last.key, last.updatedAt]),
    );
  }

  /** Up to `n` items of a query, over as many pages as it takes. */
  async #queryUpTo(input: Omit<QueryCommandInput, "TableName" | "Limit">, n: number): Promise<Item[]> {
    const out: Item[] = [];
    let start: Item | undefined;
    do {
      const page = await this.#query({
        ...input,
        Limit: n - out.length,
        ...(start ? { ExclusiveStartKey: start } : {}),
      });
      out.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start && out.length < n);
    return out;
  }

  async close(): Promise<void> {
    // The client belongs to the caller (it may be shared); nothing to release here.
  }

  async #query(input: Omit<QueryCommandInput, "TableName">) {
    return this.#call(() => this.#db.send(new QueryCommand({ TableName: this.#table, ...input })));
  }

  async #call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw unavailable(e);
    }
  }
}

function unavailable(e: unknown): Error {
  if (e instanceof ConflictError || e instanceof UnavailableError) return e;
  const name = (e as { name?: string })?.name ?? "Error";
  return new UnavailableError(
    `DynamoDB call failed (${name}); check the table name, region and credentials`,
    { cause: e },
  );
}

/** `pk = :p`, and `sk > :after` when there is an `after` (DynamoDB rejects empty strings in key conditions). */
function keyAfter(pk: string, value: string, sk: string, after: string | undefined) {
  const values: Item = { ":p": { S: value } };
  if (after === undefined || after === "")
    return { KeyConditionExpression: `${pk} = :p`, ExpressionAttributeValues: values };
  values[":after"] = { S: after };
  return { KeyConditionExpression: `${pk} = :p AND ${sk} > :after`, ExpressionAttributeValues: values };
}

const isAnyAppend = (op: WriteOp | undefined): boolean => op?.op === "append" && op.expectedVersion === "any";

/** Byte order, as DynamoDB orders string sort keys (Arbor's keys are ASCII). */
const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A log position (logSortKey): when the event was recorded (ISO 8601, ms), its seq, its id. */
const LOG_POSITION = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z#\d{12}#.{1,200}$/;

/** "2026-12" after "2026-11", "2027-01" after "2026-12". */
function nextMonth(month: string): string {
  const [year, m] = month.split("-").map(Number) as [number, number];
  return m === 12 ? `${year + 1}-01` : `${year}-${String(m + 1).padStart(2, "0")}`;
}
