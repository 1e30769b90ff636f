/**
 * The single DynamoDB table behind the AWS state store. Both the adapter (to create it against
 * DynamoDB Local) and the CDK stack (to deploy it) build it from these definitions.
 *
 * items                               pk                    sk
 *   record                            R#<key>               R
 *   event                             S#<streamId>          E#<seq, 12 digits>
 *   event-id guard (dedupe)           I#<eventId>           I
 * indexes
 *   byParent  gsi1pk = parent                 gsi1sk = key             (records with a parent)
 *   byStatus  gsi2pk = <kind>#<status>#<0..7> gsi2sk = <updatedAt>#<key>  (records with a status,
 *                                                                          spread over STATUS_SHARDS keys
 *                                                                          by a hash of the record's key)
 *   streams   gsi3pk = STREAM#<0..15>         gsi3sk = <streamId>      (first event of each stream,
 *                                                                          spread over STREAM_SHARDS keys)
 *   log       gsi4pk = LOG#<yyyy-mm>#<0..15>  gsi4sk = <recordedAt>#<seq>#<eventId>  (every event: the
 *                                                                          global log, by month, spread
 *                                                                          over LOG_SHARDS keys by event id)
 * Every key attribute is a string. byParent and byStatus project whole records (their queries
 * return records); streams projects only `streamId`.
 */
export const TABLE_KEYS = { partitionKey: "pk", sortKey: "sk" } as const;

export interface GsiDefinition {
  readonly name: string;
  readonly partitionKey: string;
  readonly sortKey: string;
  /** Non-key attributes copied into the index; "ALL" for every attribute. */
  readonly projection: "ALL" | readonly string[];
}

export const GSI = {
  byParent: { name: "byParent", partitionKey: "gsi1pk", sortKey: "gsi1sk", projection: "ALL" },
  byStatus: { name: "byStatus", partitionKey: "gsi2pk", sortKey: "gsi2sk", projection: "ALL" },
  streams: { name: "streams", partitionKey: "gsi3pk", sortKey: "gsi3sk", projection: ["streamId"] },
  log: { name: "log", partitionKey: "gsi4pk", sortKey: "gsi4sk", projection: "ALL" },
} as const satisfies Record<string, GsiDefinition>;

/**
 * The global event log (StateStore.readAll) on DynamoDB: every event is in the `log` index under
 * its month and one of LOG_SHARDS keys, sorted by when it was recorded (logSortKey); a read merges
 * the shards of a month and goes on month by month. Why not a sequence: a counter every append
 * writes is one hot item (its transactions conflict with each other), and a stream consumer that
 * numbers events would be a function and a queue of its own; time orders the log without either,
 * at the price of a settling time (LOG_SETTLE_MS). The log begins with the month this layout came
 * in (LOG_EPOCH): events written before it have no log keys.
 */
export const LOG_SHARDS = 16;
export const LOG_EPOCH = "2026-11";
/**
 * How old an event must be before the log gives it: an append is stamped when its transaction is
 * made, and commits (and reaches the index, eventually consistent) a little after; an event given
 * only once every append stamped before it has landed never sorts before a position already given.
 */
export const LOG_SETTLE_MS = 5_000;
export const logPartition = (month: string, shard: number): string => `LOG#${month}#${shard}`;
/**
 * An event's place in the log: when its append was made, then its seq (one append's events, or a
 * stream's appends in one millisecond, keep their order), then its id. A stream's events keep
 * their own order as long as its appends are further apart than its writers' clocks differ
 * (Lambda's are kept in step to within about a millisecond; a stream's appends are a step apart).
 */
export const logSortKey = (recordedAt: string, seq: number, eventId: string): string =>
  `${recordedAt}#${String(seq).padStart(12, "0")}#${eventId}`;

/** How many index keys the first events of streams are spread over (no single hot key). */
export const STREAM_SHARDS = 16;

/**
 * How many index keys each kind and status is spread over: every task of every tenant moving
 * through `task#in_progress` would otherwise write one index partition. A query fans out over all
 * of them and merges (oldest first), plus the unsharded key of the layout before it
 * (`<kind>#<status>`), so records written then are found until they are next written.
 */
export const STATUS_SHARDS = 8;

/** The byStatus partition key of a shard; without a shard, the key of the layout before shards. */
export const statusPartition = (kind: string, status: string, shard?: number): string =>
  shard === undefined ? `${kind}#${status}` : `${kind}#${status}#${shard}`;

/** Items that may expire carry this Number attribute (epoch seconds); DynamoDB's TTL deletes them. */
export const TTL_ATTRIBUTE = "expiresAt";

export const ALL_GSIS: readonly GsiDefinition[] = [GSI.byParent, GSI.byStatus, GSI.streams, GSI.log];

/** DynamoDB's per-transaction item limit. */
export const MAX_TRANSACT_ITEMS = 100;
