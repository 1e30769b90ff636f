import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqsCommandQueues, WAITING_TTL_MS } from "../../shared/adapters/aws/sqs-command-queues.ts";
import { COMMANDS } from "../../shared/engine/context.ts";
import { UnavailableError } from "../../shared/kernel/errors.ts";
import { createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";

/**
 * How many ready commands wait for the ready step or are being run by it (SqsCommandQueues.inQueue,
 * the AWS runtime's leafSteps, shared/engine/leaf-slots.ts): the real SQS client against the SQS peer.
 */
let peer: SqsPeer;
let client: SQSClient;
let n = 0;
beforeAll(async () => {
  peer = await SqsPeer.start();
  client = peer.client();
});
afterAll(async () => {
  client.destroy();
  await peer.close();
});

/** Command queues whose ready command has a queue of its own (as the engine stack makes them). */
function readyQueue(): { queues: SqsCommandQueues; url: string } {
  const url = peer.createQueue(`ready-${++n}`);
  const queues = new SqsCommandQueues({
    client,
    queues: { [COMMANDS.ready]: { subscription: "ready", queueUrl: url } },
    region: "us-east-1",
  });
  return { queues, url };
}

const ready = (taskId: string) => ({
  id: `evt-${taskId}`,
  source: "arbor.engine",
  detailType: COMMANDS.ready,
  detail: { taskId: `cld:common.Tenant.acme/common.Conversation.c1/plan.Task.${taskId}` },
});

describe("the ready steps on SQS", () => {
  it("counts the commands waiting and those a step has taken until they are done, and reads SQS at most once a second", async () => {
    const { queues, url } = readyQueue();
    const t0 = 1_000_000;
    expect(await queues.inQueue(COMMANDS.ready, t0)).toBe(0);
    await queues.send([ready("a"), ready("b"), ready("c")]);
    // Within a second the count read is answered again, from memory.
    expect(await queues.inQueue(COMMANDS.ready, t0 + WAITING_TTL_MS - 1)).toBe(0);
    expect(await queues.inQueue(COMMANDS.ready, t0 + WAITING_TTL_MS)).toBe(3);
    // A message a step received is being run: still counted, until it is deleted (its step done).
    const taken = await client.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 2, VisibilityTimeout: 60 }),
    );
    expect(taken.Messages).toHaveLength(2);
    expect(await queues.inQueue(COMMANDS.ready, t0 + 2 * WAITING_TTL_MS)).toBe(3);
    await client.send(
      new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: String(taken.Messages?.[0]?.ReceiptHandle) }),
    );
    expect(await queues.inQueue(COMMANDS.ready, t0 + 3 * WAITING_TTL_MS)).toBe(2);
    const reads = peer.calls.filter((c) => c === "GetQueueAttributes").length;
    await Promise.all([1, 2, 3].map(() => queues.inQueue(COMMANDS.ready, t0 + 3 * WAITING_TTL_MS + 1)));
    expect(peer.calls.filter((c) => c === "GetQueueAttributes").length).toBe(reads);
  });

  it("a command with no queue has no backlog to tell", async () => {
    const { queues } = readyQueue();
    expect(await queues.inQueue(COMMANDS.turn)).toBeUndefined();
  });

  it("SQS not answering: an UnavailableError, and the next call reads again", async () => {
    const url = peer.createQueue(`ready-${++n}`);
    const away = new SQSClient({
      region: "us-east-1",
      endpoint: "http://127.0.0.1:9", // nothing listens
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
      maxAttempts: 1,
    });
    const queues = new SqsCommandQueues({
      client: away,
      queues: { [COMMANDS.ready]: { subscription: "ready", queueUrl: url } },
      region: "us-east-1",
    });
    try {
      await expect(queues.inQueue(COMMANDS.ready, 5)).rejects.toBeInstanceOf(UnavailableError);
      // Not kept: the next call within the second tries SQS again (and fails again).
      await expect(queues.inQueue(COMMANDS.ready, 6)).rejects.toThrow(/GetQueueAttributes/);
    } finally {
      away.destroy();
    }
  });

  it("the AWS runtime's leafSteps are the ready and turn queues'; without command queues there are none", async () => {
    const url = peer.createQueue(`ready-${++n}`);
    const turnUrl = peer.createQueue(`turn-${n}`);
    const plainUrl = peer.createQueue(`plan-${n}`);
    const env = {
      ARBOR_MODE: "aws",
      AWS_REGION: "us-east-1",
      ARBOR_RESOURCES_BUCKET: "arbor-backlog",
      ARBOR_TABLE_NAME: "arbor-backlog",
      ARBOR_EVENT_BUS_NAME: "arbor-backlog",
      ARBOR_POLICY_ENGINE: "cedar",
    };
    const queued = loadConfig({
      ...env,
      ARBOR_COMMAND_QUEUES: JSON.stringify({ ready: url, turn: turnUrl, plan: plainUrl }),
    });
    const plain = loadConfig(env);
    if (queued.mode !== "aws" || plain.mode !== "aws") throw new Error("expected aws mode");
    const rt = createAwsRuntime(queued, { sqs: client });
    const without = createAwsRuntime(plain);
    try {
      expect(await rt.leafSteps?.()).toBe(0);
      await new SqsCommandQueues({
        client,
        queues: {
          [COMMANDS.ready]: { subscription: "ready", queueUrl: url },
          [COMMANDS.turn]: { subscription: "turn", queueUrl: turnUrl },
          [COMMANDS.plan]: { subscription: "plan", queueUrl: plainUrl },
        },
        region: "us-east-1",
      }).send([
        ready("d"),
        ready("e"),
        { ...ready("f"), id: "evt-turn-f", detailType: COMMANDS.turn },
        { ...ready("g"), id: "evt-plan-g", detailType: COMMANDS.plan },
      ]);
      // The runtime's read is a second old at most: once it is, the leaves' commands are counted
      // (two starts and a turn), not the plan's.
      await new Promise((r) => setTimeout(r, WAITING_TTL_MS + 50));
      expect(await rt.leafSteps?.()).toBe(3);
      expect(without.leafSteps).toBeUndefined();
    } finally {
      await rt.close();
      await without.close();
    }
  });
});
