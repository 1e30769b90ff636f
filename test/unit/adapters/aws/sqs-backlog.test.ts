import type { SQSClient } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { SqsCommandQueues, WAITING_TTL_MS } from "../../../../shared/adapters/aws/sqs-command-queues.ts";
import { COMMANDS } from "../../../../shared/engine/context.ts";
import { UnavailableError } from "../../../../shared/kernel/errors.ts";

/**
 * SqsCommandQueues.inQueue reads the ready queue's two counts (the bound of a request's leaves gives
 * way on them: shared/engine/leaf-slots.ts). An answer that is not two counts is no count: it is
 * refused, never taken for an idle queue, and not kept.
 */
function queuesAnswering(answers: (Record<string, string> | undefined)[]) {
  const sent: unknown[] = [];
  const client = {
    send: async (command: unknown) => {
      sent.push(command);
      return { Attributes: answers.shift() };
    },
  } as unknown as SQSClient;
  const queues = new SqsCommandQueues({
    client,
    queues: { [COMMANDS.ready]: { subscription: "ready", queueUrl: "http://sqs.local/ready" } },
    region: "us-east-1",
  });
  return { queues, sent };
}

describe("the ready queue's count, garbled", () => {
  for (const [what, attributes] of [
    ["missing", {}],
    ["empty", { ApproximateNumberOfMessages: "", ApproximateNumberOfMessagesNotVisible: "0" }],
    ["blank", { ApproximateNumberOfMessages: "0", ApproximateNumberOfMessagesNotVisible: " " }],
    ["negative", { ApproximateNumberOfMessages: "-3", ApproximateNumberOfMessagesNotVisible: "0" }],
    ["not a number", { ApproximateNumberOfMessages: "many", ApproximateNumberOfMessagesNotVisible: "0" }],
  ] as const)
    it(`an attribute ${what}: an UnavailableError, and the next call reads again`, async () => {
      const { queues, sent } = queuesAnswering([
        attributes,
        { ApproximateNumberOfMessages: "4", ApproximateNumberOfMessagesNotVisible: "3" },
      ]);
      await expect(queues.inQueue(COMMANDS.ready, 10)).rejects.toBeInstanceOf(UnavailableError);
      expect(await queues.inQueue(COMMANDS.ready, 11)).toBe(7);
      expect(sent).toHaveLength(2);
      // The good count is kept for a second.
      expect(await queues.inQueue(COMMANDS.ready, 10 + WAITING_TTL_MS)).toBe(7);
      expect(sent).toHaveLength(2);
    });
});
