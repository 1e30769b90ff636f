import {
  type AttributeValue,
  BatchWriteItemCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { GSI } from "../../shared/adapters/aws/dynamo-schema.ts";

/**
 * A DynamoDB client whose global secondary indexes lag, as DynamoDB's do (they are eventually
 * consistent; DynamoDB Local's never lag, so without this no test can see an engine that decides
 * on an index read right after writing to it).
 *
 * It wraps a real client against DynamoDB Local. Every write goes through unchanged; the wrapper
 * keeps, per item, the states that item went through, each stamped with the number of the write
 * (a successful write command: a transaction counts once) that produced it. A query on a lagging
 * index is answered as of `lag` writes ago, item by item: an item written since is shown as it was
 * then, so a new item is not yet listed, an old status is still listed under its old key, a
 * deleted item is still listed, and a record that changed is returned with its old data. Base
 * table reads (GetItem, table queries: consistent reads) are never touched.
 *
 * `lag` is in writes, not time: a test decides exactly how stale the index is, whatever the
 * machine's speed. `settle()` lets the index catch up with every write so far.
 *
 * The streams index is not lagged: only replay and audits list streams, and nothing decides on it.
 */
type Item = Record<string, AttributeValue>;
type Version = { seq: number; item: Item | undefined };

export interface LaggingIndexOptions {
  /** How many writes old an index read is (default 8); 0 = no lag. */
  lag?: number;
  /** Index names that lag (default: byParent and byStatus). */
  indexes?: readonly string[];
}

export interface LaggingIndex {
  /** The client to hand to the adapters (same class, same methods as the wrapped one). */
  readonly client: DynamoDBClient;
  lag: number;
  /** Writes seen so far. */
  readonly writes: number;
  /** Index queries answered so far, and how many of them differed from the current table. */
  readonly stats: { queries: number; stale: number };
  /** Lets the indexes catch up with every write so far (later writes lag again). */
  settle(): void;
}

const keyOf = (item: Item): string => `${item.pk?.S ?? ""}\u0000${item.sk?.S ?? ""}`;
const pick = (item: Item): Item => ({ pk: item.pk as AttributeValue, sk: item.sk as AttributeValue });

export function laggingIndex(inner: DynamoDBClient, options: LaggingIndexOptions = {}): LaggingIndex {
  const lagged = new Set(options.indexes ?? [GSI.byParent.name, GSI.byStatus.name]);
  const history = new Map<string, { table: string; versions: Version[] }>();
  let writes = 0;
  let settledAt = 0;
  const stats = { queries: 0, stale: 0 };
  const state: { lag: number } = { lag: options.lag ?? 8 };

  const getItem = async (table: string, key: Item): Promise<Item | undefined> =>
    (await inner.send(new GetItemCommand({ TableName: table, Key: pick(key), ConsistentRead: true }))).Item;

  /** What a write will touch: table, key, and (when the write says it whole) the item after it. */
  type Touch = { table: string; key: Item; after?: Item | "deleted"; mustBeNew?: boolean };
  const touchesOf = (command: unknown): Touch[] | undefined => {
    if (command instanceof TransactWriteItemsCommand) {
      return (command.input.TransactItems ?? []).flatMap((t): Touch[] => {
        if (t.Put)
          return [
            {
              table: String(t.Put.TableName),
              key: t.Put.Item as Item,
              after: t.Put.Item as Item,
              mustBeNew: t.Put.ConditionExpression === "attribute_not_exists(pk)",
            },
          ];
        if (t.Delete)
          return [{ table: String(t.Delete.TableName), key: t.Delete.Key as Item, after: "deleted" }];
        if (t.Update) return [{ table: String(t.Update.TableName), key: t.Update.Key as Item }];
        return [];
      });
    }
    if (command instanceof PutItemCommand)
      return [
        {
          table: String(command.input.TableName),
          key: command.input.Item as Item,
          after: command.input.Item as Item,
        },
      ];
    if (command instanceof DeleteItemCommand)
      return [{ table: String(command.input.TableName), key: command.input.Key as Item, after: "deleted" }];
    if (command instanceof UpdateItemCommand)
      return [{ table: String(command.input.TableName), key: command.input.Key as Item }];
    if (command instanceof BatchWriteItemCommand) {
      return Object.entries(command.input.RequestItems ?? {}).flatMap(([table, requests]) =>
        requests.flatMap((r): Touch[] => {
          if (r.PutRequest)
            return [{ table, key: r.PutRequest.Item as Item, after: r.PutRequest.Item as Item }];
          if (r.DeleteRequest) return [{ table, key: r.DeleteRequest.Key as Item, after: "deleted" }];
          return [];
        }),
      );
    }
    return undefined;
  };

  const remember = (touch: Touch, seq: number, item: Item | undefined) => {
    const id = `${touch.table}\u0001${keyOf(touch.key)}`;
    const entry = history.get(id) ?? { table: touch.table, versions: [] };
    entry.versions.push({ seq, item });
    entry.versions.sort((a, b) => a.seq - b.seq); // a read-after may finish after a later write
    // Keep what a read `lag` writes back can still need: the versions since, and the one before.
    const horizon = Math.max(writes - state.lag, settledAt);
    const firstNeeded = entry.versions.findLastIndex((v) => v.seq <= horizon);
    if (firstNeeded > 0) entry.versions.splice(0, firstNeeded);
    history.set(id, entry);
  };

  const write = async (command: unknown, send: () => Promise<unknown>): Promise<unknown> => {
    const touches = touchesOf(command) ?? [];
    // The state before the first write the wrapper sees of an item (a table that already had data).
    const before = new Map<string, { table: string; versions: Version[] }>();
    for (const t of touches) {
      const id = `${t.table}\u0001${keyOf(t.key)}`;
      if (history.has(id) || before.has(id)) continue;
      const item = t.mustBeNew ? undefined : await getItem(t.table, t.key);
      before.set(id, { table: t.table, versions: [{ seq: 0, item }] });
    }
    const out = await send(); // a refused write changes nothing, here either
    // A concurrent write may have started an item's history meanwhile: it knows better.
    for (const [id, entry] of before) if (!history.has(id)) history.set(id, entry);
    const seq = ++writes;
    for (const t of touches) {
      const after = t.after === "deleted" ? undefined : (t.after ?? (await getItem(t.table, t.key)));
      remember(t, seq, after);
    }
    return out;
  };

  /** The item as the index saw it: its latest version written at or before `at`. */
  const asOf = (versions: readonly Version[], at: number): Item | undefined => {
    let seen: Item | undefined;
    let found = false;
    for (const v of versions) {
      if (v.seq > at) break;
      seen = v.item;
      found = true;
    }
    return found ? seen : versions[0]?.item;
  };

  const query = async (input: QueryCommandInput): Promise<QueryCommandOutput> => {
    const index = GSI_BY_NAME.get(String(input.IndexName));
    if (!index) throw new Error(`lagging-dynamo: unknown index ${input.IndexName}`);
    const matches = keyCondition(input, index);
    // The whole current answer, every page, as the index would give it with no lag.
    const current: Item[] = [];
    let start: Item | undefined;
    let last: QueryCommandOutput | undefined;
    do {
      const { Limit: _l, ExclusiveStartKey: _s, ...rest } = input;
      last = await inner.send(new QueryCommand({ ...rest, ...(start ? { ExclusiveStartKey: start } : {}) }));
      current.push(...(last.Items ?? []));
      start = last.LastEvaluatedKey;
    } while (start);
    stats.queries++;
    const at = Math.max(writes - state.lag, settledAt);
    const byKey = new Map<string, Item>();
    for (const item of current) byKey.set(keyOf(item), item);
    for (const [id, entry] of history) {
      if (entry.table !== input.TableName) continue;
      const seen = asOf(entry.versions, at);
      const key = id.slice(id.indexOf("\u0001") + 1);
      if (seen && matches(seen)) byKey.set(key, seen);
      else byKey.delete(key);
    }
    const sk = index.sortKey;
    let items = [...byKey.values()].sort((a, b) => compare(a[sk]?.S ?? "", b[sk]?.S ?? ""));
    if (input.ScanIndexForward === false) items.reverse();
    if (
      JSON.stringify(items.map(keyOf)) !== JSON.stringify(current.map(keyOf)) ||
      items.some((i, n) => JSON.stringify(i) !== JSON.stringify(current[n]))
    )
      stats.stale++;
    if (input.ExclusiveStartKey) {
      const after = input.ExclusiveStartKey[sk]?.S ?? "";
      items = items.filter((i) => {
        const c = compare(i[sk]?.S ?? "", after);
        return input.ScanIndexForward === false ? c < 0 : c > 0;
      });
    }
    const limited = input.Limit !== undefined && items.length > input.Limit;
    const page = limited ? items.slice(0, input.Limit) : items;
    const tail = page.at(-1);
    return {
      $metadata: last?.$metadata ?? {},
      Items: page,
      Count: page.length,
      ScannedCount: page.length,
      ...(limited && tail
        ? {
            LastEvaluatedKey: {
              ...pick(tail),
              [index.partitionKey]: tail[index.partitionKey] as AttributeValue,
              [sk]: tail[sk] as AttributeValue,
            },
          }
        : {}),
    };
  };

  const send = (command: unknown, ...rest: unknown[]): Promise<unknown> => {
    const original = () => (inner.send as (...a: unknown[]) => Promise<unknown>)(command, ...rest);
    if (command instanceof QueryCommand && command.input.IndexName && lagged.has(command.input.IndexName)) {
      if (command.input.ConsistentRead)
        throw new Error(
          "lagging-dynamo: a global secondary index has no consistent reads (DynamoDB refuses)",
        );
      return query(command.input);
    }
    if (touchesOf(command)) return write(command, original);
    return original();
  };

  const client = new Proxy(inner, {
    get(target, prop, receiver) {
      if (prop === "send") return send;
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });

  return {
    client,
    get lag() {
      return state.lag;
    },
    set lag(n: number) {
      state.lag = n;
    },
    get writes() {
      return writes;
    },
    stats,
    settle() {
      settledAt = writes;
    },
  };
}

const GSI_BY_NAME = new Map<string, { partitionKey: string; sortKey: string }>(
  Object.values(GSI).map((g) => [g.name, g]),
);

/** Byte order, as DynamoDB sorts string keys (close enough for the ASCII keys Arbor writes). */
const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The key conditions the adapter writes: `pk = :v`, optionally `AND sk <op> :w` (=, <, <=, >, >=),
 * `AND sk BETWEEN :w AND :x` or `AND begins_with(sk, :w)`. Anything else is refused, loudly: the
 * wrapper must not guess.
 */
function keyCondition(
  input: QueryCommandInput,
  index: { partitionKey: string; sortKey: string },
): (item: Item) => boolean {
  const expr = String(input.KeyConditionExpression);
  const names = input.ExpressionAttributeNames ?? {};
  const values = input.ExpressionAttributeValues ?? {};
  const attr = (n: string) => names[n] ?? n;
  const value = (v: string) => {
    const s = values[v]?.S;
    if (s === undefined) throw new Error(`lagging-dynamo: no string value ${v} in ${expr}`);
    return s;
  };
  const m =
    /^\s*([#\w]+)\s*=\s*(:\w+)\s*(?:AND\s+(?:([#\w]+)\s*(=|<=|<|>=|>)\s*(:\w+)|([#\w]+)\s+BETWEEN\s+(:\w+)\s+AND\s+(:\w+)|begins_with\(\s*([#\w]+)\s*,\s*(:\w+)\s*\)))?\s*$/i.exec(
      expr,
    );
  if (!m || attr(m[1] as string) !== index.partitionKey)
    throw new Error(`lagging-dynamo: key condition not modelled: ${expr}`);
  const pk = value(m[2] as string);
  const skName = m[3] ?? m[6] ?? m[9];
  if (skName !== undefined && attr(skName) !== index.sortKey)
    throw new Error(`lagging-dynamo: key condition not modelled: ${expr}`);
  const op = m[4] ?? (m[6] ? "between" : m[9] ? "begins_with" : undefined);
  const lo = m[5] ?? m[7] ?? m[10];
  const bound = lo === undefined ? undefined : value(lo);
  const upper = m[8] === undefined ? undefined : value(m[8]);
  return (item) => {
    if (item[index.partitionKey]?.S !== pk) return false;
    const s = item[index.sortKey]?.S;
    if (s === undefined) return false;
    if (op === undefined || bound === undefined) return true;
    const c = compare(s, bound);
    switch (op) {
      case "=":
        return c === 0;
      case "<":
        return c < 0;
      case "<=":
        return c <= 0;
      case ">":
        return c > 0;
      case ">=":
        return c >= 0;
      case "between":
        return c >= 0 && compare(s, upper as string) <= 0;
      default:
        return s.startsWith(bound);
    }
  };
}
