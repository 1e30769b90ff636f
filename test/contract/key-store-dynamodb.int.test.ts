import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { keyStoreContract } from "./key-store.contract.ts";

// The real DynamoDB client against DynamoDB Local (started by test/peers/global-setup.ts).
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

keyStoreContract("state store records (DynamoDB Local)", async () => {
  const tableName = `arbor-keys-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  return {
    store: new StateKeyStore(new DynamoStateStore({ client, tableName })),
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});
