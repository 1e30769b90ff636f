import type { RemovalPolicy } from "aws-cdk-lib";
import { type Attribute, AttributeType, BillingMode, ProjectionType, Table } from "aws-cdk-lib/aws-dynamodb";
import { Construct } from "constructs";
import { ALL_GSIS, TABLE_KEYS, TTL_ATTRIBUTE } from "../../shared/adapters/aws/dynamo-schema.ts";

export interface StateTableProps {
  readonly removalPolicy: RemovalPolicy;
  /** On outside dev: the table cannot be deleted until this is switched off. */
  readonly deletionProtection: boolean;
}

/** Every key in the schema is a string, as the adapter's CreateTable declares them. */
const stringKey = (name: string): Attribute => ({ name, type: AttributeType.STRING });

/**
 * The single table behind the AWS state store, built from the same constants the adapter uses
 * against DynamoDB Local (shared/adapters/aws/dynamo-schema.ts), so the two cannot drift.
 */
export class StateTable extends Construct {
  readonly table: Table;

  constructor(scope: Construct, id: string, props: StateTableProps) {
    super(scope, id);
    this.table = new Table(this, "Table", {
      partitionKey: stringKey(TABLE_KEYS.partitionKey),
      sortKey: stringKey(TABLE_KEYS.sortKey),
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: props.deletionProtection,
      timeToLiveAttribute: TTL_ATTRIBUTE,
      removalPolicy: props.removalPolicy,
    });
    for (const gsi of ALL_GSIS) {
      this.table.addGlobalSecondaryIndex({
        indexName: gsi.name,
        partitionKey: stringKey(gsi.partitionKey),
        sortKey: stringKey(gsi.sortKey),
        ...(gsi.projection === "ALL"
          ? { projectionType: ProjectionType.ALL }
          : { projectionType: ProjectionType.INCLUDE, nonKeyAttributes: [...gsi.projection] }),
      });
    }
  }
}
