import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll } from "vitest";
import {
  DELIVERY_MESSAGE_KIND,
  MESSAGE_KIND_ATTRIBUTE,
  SqsDeliveryQueue,
} from "../../shared/adapters/aws/sqs-delivery-queue.ts";
import { deliveryOfMessage } from "../../shared/ports/delivery-queue.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";
import { deliveryQueueContract } from "./delivery-queue.contract.ts";

// The real SQS client against the SQS peer (test/peers/sqs-peer.ts).
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

deliveryQueueContract("Amazon SQS (SQS peer, real client)", async () => {
  const queueUrl = peer.createQueue(`deliveries-${++n}`);
  const take = async (): Promise<string[]> => {
    const got: string[] = [];
    for (;;) {
      const out = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          MessageAttributeNames: ["All"],
          VisibilityTimeout: 600,
        }),
      );
      if (!out.Messages?.length) return got;
      for (const m of out.Messages) {
        // Every message says what it is, so a dead-letter redrive can tell it from a step's.
        if (m.MessageAttributes?.[MESSAGE_KIND_ATTRIBUTE]?.StringValue !== DELIVERY_MESSAGE_KIND)
          throw new Error(`a message without its kind: ${m.Body}`);
        const id = deliveryOfMessage(m.Body ?? "");
        if (id) got.push(id);
        await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  };
  return {
    queue: new SqsDeliveryQueue({ client, queueUrl }),
    ready: take,
    later: () => {
      peer.showDelayed(queueUrl);
      return take();
    },
    requests: () => peer.calls.length,
    cleanup: async () => {},
  };
});
