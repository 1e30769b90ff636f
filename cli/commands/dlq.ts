import type { Command } from "../command.ts";

export const dlq: Command = {
  name: "dlq",
  usage: ["dlq redrive [--queue <DeadLetterQueueUrl>] [--bus <EventBusName>] [--dry-run] [--max <n>]"],
  summary: "show each message of the dead-letter queue and send it back where it came from",
  options: [
    ["--queue <url>", "the queue (default ARBOR_DLQ_URL: storage stack output DeadLetterQueueUrl)"],
    ["--bus <name>", "the event bus, to find each route's function (default ARBOR_EVENT_BUS_NAME)"],
    ["--dry-run", "show the messages, send and delete nothing"],
    ["--max <n>", "at most n messages"],
  ],
  examples: ["arbor dlq redrive --dry-run --max 10"],
  notes: [
    "AWS credentials and AWS_REGION from the SDK's default chain; ARBOR_SQS_ENDPOINT, ARBOR_LAMBDA_ENDPOINT and ARBOR_EVENTBRIDGE_ENDPOINT point the clients elsewhere.",
  ],

  async local({ args, options, write }) {
    const { loadOperatorSettings } = await import("../../shared/runtime/config.ts");
    const { dlqCommand } = await import("../lib/dlq.ts");
    return dlqCommand(
      args[0],
      { queue: options.queue, bus: options.bus, dryRun: options["dry-run"], max: options.max },
      loadOperatorSettings(),
      write,
    );
  },
};
