import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { laggingIndex } from "../peers/lagging-dynamo.ts";
import { notifyRecordsContract } from "./notify-records.contract.ts";

// The real DynamoDB client against DynamoDB Local (started by test/peers/global-setup.ts).
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

notifyRecordsContract("DynamoDB (DynamoDB Local)", async () => {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  return {
    store: new DynamoStateStore({ client, tableName }),
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});

// Indexes that lag as DynamoDB's GSIs may: every decision is on a base record, so all still holds.
notifyRecordsContract("DynamoDB (DynamoDB Local, indexes lagging 3 writes)", async () => {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  const lagging = laggingIndex(client, { lag: 3 });
  return {
    store: new DynamoStateStore({ client: lagging.client, tableName }),
    settleIndexes: () => lagging.settle(),
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});
