import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { EventLogAudit } from "../../shared/adapters/shared/event-log-audit.ts";
import { auditLogContract } from "./audit-log.contract.ts";
import { stateStoreContract } from "./state-store.contract.ts";

// The real DynamoDB client against DynamoDB Local (started by test/peers/global-setup.ts).
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

stateStoreContract("DynamoDB (DynamoDB Local)", async () => {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  const store = new DynamoStateStore({ client, tableName });
  return {
    store,
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});

auditLogContract("event log of the DynamoDB state store (DynamoDB Local)", async () => {
  const tableName = `arbor-test-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  return {
    audit: new EventLogAudit(new DynamoStateStore({ client, tableName })),
    cleanup: async () => {
      await client.send(new DeleteTableCommand({ TableName: tableName }));
    },
  };
});
