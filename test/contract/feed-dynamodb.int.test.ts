import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { SqliteObjectStore } from "../../shared/adapters/local/sqlite-object-store.ts";
import { laggingIndex } from "../peers/lagging-dynamo.ts";
import { feedContract } from "./feed.contract.ts";

// The real DynamoDB client against DynamoDB Local (started by test/peers/global-setup.ts); the
// object store only lists children when an index lags, and its listings are consistent.
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

async function table(lag: number) {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  const objects = new SqliteObjectStore({ path: ":memory:" });
  const lagging = laggingIndex(client, { lag });
  return {
    state: new DynamoStateStore({ client: lag > 0 ? lagging.client : client, tableName }),
    objects,
    ...(lag > 0 ? { staleIndexReads: () => lagging.stats.stale } : {}),
    cleanup: async () => {
      await objects.close();
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
}

feedContract("DynamoDB (DynamoDB Local)", () => table(0));
// Indexes that lag as DynamoDB's GSIs may: children are still all found (engine/steps/children.ts).
feedContract("DynamoDB (DynamoDB Local, indexes lagging 5 writes)", () => table(5));
