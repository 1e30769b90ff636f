import { randomBytes } from "node:crypto";
import { DeleteTableCommand, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DataFactory } from "n3";
import { describe, expect, inject, it } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { StateGraphStore } from "../../shared/graph/state-graph-store.ts";
import { UnavailableError } from "../../shared/kernel/errors.ts";
import { laggingIndex } from "../peers/lagging-dynamo.ts";
import { graphStoreContract, t } from "./graph-store.contract.ts";

/**
 * The graph on the AWS state store: the real DynamoDB client against DynamoDB Local (started by
 * test/peers/global-setup.ts), and again with a byParent index that lags as a GSI may.
 */
const client = new DynamoDBClient({
  endpoint: inject("dynamoEndpoint"),
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});

async function table(): Promise<{ tableName: string; drop: () => Promise<void> }> {
  const tableName = `arbor-graph-${randomBytes(6).toString("hex")}`;
  await DynamoStateStore.ensureTable(client, tableName);
  return {
    tableName,
    drop: async () => void (await client.send(new DeleteTableCommand({ TableName: tableName }))),
  };
}

graphStoreContract("state store on DynamoDB (DynamoDB Local)", async () => {
  const { tableName, drop } = await table();
  return {
    // Each graph store its own state store instance: as separate Lambda instances are.
    open: (options = {}) => new StateGraphStore(new DynamoStateStore({ client, tableName }), options),
    cleanup: drop,
  };
});

// Every listing of the graph lags 3 writes behind; each pause of the store lets the index catch up
// (as time does on AWS), so every answer must still be exact.
graphStoreContract("state store on DynamoDB, its index lagging 3 writes", async () => {
  const { tableName, drop } = await table();
  const lagging = laggingIndex(client, { lag: 3 });
  return {
    open: (options = {}) =>
      new StateGraphStore(new DynamoStateStore({ client: lagging.client, tableName }), {
        ...options,
        sleep: async () => lagging.settle(),
      }),
    cleanup: drop,
  };
});

describe("a graph whose index lags", () => {
  const any = [
    {
      subject: DataFactory.variable("s"),
      predicate: DataFactory.variable("p"),
      object: DataFactory.variable("o"),
    },
  ];

  it("never answers from a stale listing: it waits for the index, and says so when it does not catch up", async () => {
    const { tableName, drop } = await table();
    try {
      const lagging = laggingIndex(client, { lag: 5 });
      let pauses = 0;
      const graph = new StateGraphStore(new DynamoStateStore({ client: lagging.client, tableName }), {
        sleep: async () => {
          pauses++;
        },
        maxListings: 3,
      });
      await graph.add("acme", [t("a", "p", "1")]);
      await graph.add("acme", [t("b", "p", "1")]);
      const stale = graph.query("acme", any);
      await expect(stale).rejects.toThrow(UnavailableError);
      await expect(stale).rejects.toThrow(/index is behind: try again in a moment/);
      expect(pauses).toBe(2);
      expect(lagging.stats.stale).toBeGreaterThan(0);
      lagging.settle();
      expect((await graph.query("acme", any)).bindings).toHaveLength(2);
      expect(await graph.count("acme")).toBe(2);
    } finally {
      await drop();
    }
  });

  it("twenty writers of one tenant at the same moment: every one's triples land, the count is exact", async () => {
    const { tableName, drop } = await table();
    try {
      const writers = Array.from(
        { length: 20 },
        () => new StateGraphStore(new DynamoStateStore({ client, tableName })),
      );
      const results = await Promise.allSettled(
        writers.map((w, i) =>
          w.add("acme", [t(`w${i}`, "p", "1"), t(`w${i}`, "p", "2"), t("shared", "p", "1")]),
        ),
      );
      expect(results.filter((r) => r.status === "rejected")).toEqual([]);
      expect(await writers[0]?.count("acme")).toBe(41);
    } finally {
      await drop();
    }
  }, 60_000);
});
