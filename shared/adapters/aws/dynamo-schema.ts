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
 *   byStatus  gsi2pk = <kind>#<status>        gsi2sk = <updatedAt>#<key>  (records with a status)
 *   streams   gsi3pk = "STREAM"               gsi3sk = <streamId>      (first event of each stream)
 */
export const TABLE_KEYS = { partitionKey: "pk", sortKey: "sk" } as const;

export const GSI = {
  byParent: { name: "byParent", partitionKey: "gsi1pk", sortKey: "gsi1sk" },
  byStatus: { name: "byStatus", partitionKey: "gsi2pk", sortKey: "gsi2sk" },
  streams: { name: "streams", partitionKey: "gsi3pk", sortKey: "gsi3sk" },
} as const;

export const ALL_GSIS = [GSI.byParent, GSI.byStatus, GSI.streams] as const;

/** DynamoDB's per-transaction item limit. */
export const MAX_TRANSACT_ITEMS = 100;
