import { randomBytes } from "node:crypto";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { CreateBucketCommand, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { DynamoStateStore } from "../../shared/adapters/aws/dynamo-state-store.ts";
import { withMeta } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { taskCreated, taskStarted } from "../fixtures/event-builders.ts";
import { type EventBridgePeer, startEventBridgePeer } from "../peers/eventbridge-peer.ts";

/**
 * The AWS composition root, configured the way a deployed function is (environment variables),
 * pointed at the three local peers: S3 (s3rver), DynamoDB Local, and the EventBridge peer.
 */
describe("AWS runtime against the local peers", () => {
  let peer: EventBridgePeer;
  let rt: AwsRuntime;
  const env = {
    ARBOR_MODE: "aws",
    ARBOR_TENANT: "acme",
    AWS_REGION: "us-east-1",
    ARBOR_RESOURCES_BUCKET: `arbor-rt-${randomBytes(4).toString("hex")}`,
    ARBOR_TABLE_NAME: `arbor-rt-${randomBytes(4).toString("hex")}`,
    ARBOR_EVENT_BUS_NAME: "arbor-test",
    ARBOR_POLICY_ENGINE: "cedar",
    ARBOR_S3_ENDPOINT: inject("s3Endpoint"),
    ARBOR_DYNAMODB_ENDPOINT: inject("dynamoEndpoint"),
  };

  beforeAll(async () => {
    const started = await startEventBridgePeer();
    peer = started.peer;
    const config = loadConfig({ ...env, ARBOR_EVENTBRIDGE_ENDPOINT: started.endpoint });
    if (config.mode !== "aws") throw new Error("expected aws mode");
    const credentials = { accessKeyId: "test", secretAccessKey: "test" };
    // s3rver accepts only its own demo key pair.
    const s3 = new S3Client({
      region: "us-east-1",
      endpoint: env.ARBOR_S3_ENDPOINT,
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    });
    await s3.send(new CreateBucketCommand({ Bucket: env.ARBOR_RESOURCES_BUCKET }));
    const ddb = new DynamoDBClient({
      region: "us-east-1",
      endpoint: env.ARBOR_DYNAMODB_ENDPOINT,
      credentials,
    });
    await DynamoStateStore.ensureTable(ddb, env.ARBOR_TABLE_NAME);
    const eventbridge = new EventBridgeClient({
      region: "us-east-1",
      endpoint: started.endpoint,
      credentials,
    });
    rt = createAwsRuntime(config, { s3, dynamodb: ddb, eventbridge });
  });
  afterAll(async () => {
    await rt?.close();
    await peer?.stop();
  });

  it("stores resources in S3, the task log in DynamoDB, and publishes through EventBridge", async () => {
    const conv = withMeta({ type: "common.Conversation", name: "c", parent: tenantUrn("acme") });
    const task = withMeta({ type: "plan.Task", name: "t", parent: conv.id });
    await rt.resources.put({ meta: conv });
    await rt.resources.put({ meta: task, priority: "foreground" });
    expect(await rt.resources.descendantUrns(conv.id)).toEqual([task.id]);

    await rt.tasks.record(taskCreated(task.id));
    const { view } = await rt.tasks.record(taskStarted(task.id));
    expect(view.status).toBe("in_progress");
    expect((await rt.tasks.replay()).get(task.id)).toEqual(view);

    const got: BusEnvelope[] = [];
    rt.bus.subscribe({
      name: "watch",
      pattern: { "detail-type": ["RESOURCE_PUT"] },
      handler: async (e) => void got.push(e),
    });
    await rt.bus.publish([
      { id: "evt-1", source: "arbor", detailType: "RESOURCE_PUT", detail: { urn: task.id } },
    ]);
    // The store announced both writes through EventBridge (resource-events.ts), then the event above.
    expect(peer.events.map((e) => [e["detail-type"], e.detail.urn, e.resources])).toEqual([
      ["RESOURCE_PUT", conv.id, [conv.id]],
      ["RESOURCE_PUT", task.id, [task.id]],
      ["RESOURCE_PUT", task.id, []],
    ]);
    const delivered = peer.events.at(-1);
    expect(delivered).toMatchObject({ source: "arbor", "detail-type": "RESOURCE_PUT" });
    // What EventBridge would hand the routing Lambda reaches the handler with the publisher's id.
    await rt.bus.dispatch(delivered);
    expect(got.map((e) => [e.id, e.detail])).toEqual([["evt-1", { urn: task.id }]]);
  });
});
