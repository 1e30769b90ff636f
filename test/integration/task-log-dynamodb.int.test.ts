import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { describe, inject } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { taskLogSuite } from "../unit/store/task-log.suite.ts";

const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

describe("TaskLog on DynamoDB Local", () => {
  taskLogSuite(async () => {
    const tableName = `arbor-tasklog-${randomBytes(6).toString("hex")}`;
    await DynamoStateStore.ensureTable(client, tableName);
    return {
      store: new DynamoStateStore({ client, tableName }),
      cleanup: async () => {
        await client.send(new DeleteTableCommand({ TableName: tableName }));
      },
    };
  });
});
