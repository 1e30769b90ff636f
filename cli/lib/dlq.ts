import {
  type DeadLetter,
  type DlqClients,
  deadLetterQueue,
} from "../../shared/runtime/aws/operator-tools.ts";
import type { OperatorSettings } from "../../shared/runtime/config.ts";
import { UsageError } from "../command.ts";
import { heading, note } from "./render.ts";

/**
 * `arbor dlq redrive [--dry-run] [--max N]`: shows each message of the dead-letter queue (which
 * route and function, the error attributes, the event) and sends it back to its function as an
 * asynchronous invocation (a notify queue's message back to its queue), deleting the message only
 * once it was accepted. A message that
 * cannot be sent, or whose resend fails, stays in the queue. Steps are idempotent: a message sent
 * back twice (a crash between the resend and the delete) does its work once.
 */

export interface DlqOptions {
  queue: string | undefined;
  bus: string | undefined;
  dryRun: boolean;
  max: string | undefined;
}

/** The exit code: 0 when every message read was sent back (or shown, in a dry run), else 1. */
export async function dlqCommand(
  sub: string | undefined,
  options: DlqOptions,
  settings: OperatorSettings,
  write: (line: string) => void,
  clients: DlqClients = {},
): Promise<number> {
  if (sub !== "redrive") throw new UsageError();
  const queueUrl = options.queue ?? settings.deadLetterQueueUrl;
  if (!queueUrl)
    throw new UsageError(
      `Say which queue: --queue <url> or ARBOR_DLQ_URL (the storage stack's DeadLetterQueueUrl).`,
    );
  const max = options.max === undefined ? 1000 : Number(options.max);
  if (!Number.isInteger(max) || max < 1)
    throw new UsageError(`--max is a whole number of messages, at least 1, not "${options.max}".`);
  const queue = deadLetterQueue(
    settings,
    { queueUrl, eventBusName: options.bus ?? settings.eventBusName },
    clients,
  );

  const left: DeadLetter[] = [];
  let shown = 0;
  let sent = 0;
  for (let batch = await queue.receive(max); batch.length > 0; batch = await queue.receive(max)) {
    for (const letter of batch) {
      shown++;
      if (letter.payload && letter.route && !letter.functionArn) {
        try {
          letter.functionArn = await queue.functionFor(letter.route);
        } catch (e) {
          letter.problem = (e as Error).message;
          delete letter.payload;
        }
      }
      show(letter, shown, write);
      if (options.dryRun || !(letter.payload || letter.sourceQueueArn)) {
        if (!options.dryRun) write(`   ${heading("left in the queue")}: ${letter.problem}`);
        left.push(letter);
        continue;
      }
      try {
        const fn = await queue.resend(letter);
        await queue.remove(letter);
        sent++;
        write(
          `   ${heading("sent back")} to ${fn}${letter.sourceQueueArn ? "" : " (asynchronous invocation)"}; deleted from the queue`,
        );
      } catch (e) {
        left.push(letter);
        write(`   ${heading("left in the queue")}: ${(e as Error).message}`);
      }
    }
  }
  // Visible again at once for the next reader (they were hidden while this run read the queue).
  for (const letter of left) await queue.release(letter).catch(() => undefined);

  if (shown === 0) write(note(`The dead-letter queue ${queueUrl} is empty.`));
  else if (options.dryRun)
    write(`${heading("Dry run")}: ${shown} message${shown === 1 ? "" : "s"} shown; nothing sent or deleted.`);
  else
    write(
      `${heading("Redrive")}: ${sent} of ${shown} sent back and deleted; ${left.length} left in the queue.` +
        (sent > 0 ? note(" Steps are idempotent: one that already ran does nothing again.") : ""),
    );
  return !options.dryRun && left.length > 0 ? 1 : 0;
}

function show(letter: DeadLetter, n: number, write: (line: string) => void): void {
  const from =
    letter.origin === "lambda"
      ? "a step's invocation that failed every Lambda attempt"
      : letter.origin === "eventbridge"
        ? `an event EventBridge could not deliver (rule ${letter.ruleArn ?? "?"})`
        : letter.origin === "sqs"
          ? letter.payload
            ? `a command its step failed every time, moved from its queue ${letter.sourceQueueArn ?? "?"}`
            : `a message the notify function failed every time, moved from ${letter.sourceQueueArn ?? "?"}`
          : "a message of unknown origin";
  write(
    `${heading(`#${n}`)} ${letter.messageId} ${note(`${letter.sentAt ?? ""} received ${letter.receiveCount ?? "?"}x`)}`,
  );
  write(`   from: ${from}`);
  write(`   route: ${letter.route ?? "?"}${letter.functionArn ? `, function ${letter.functionArn}` : ""}`);
  const errors = Object.entries(letter.errors).map(([k, v]) => `${k}=${v}`);
  write(`   errors: ${errors.length ? errors.join("; ") : "(none given)"}`);
  const event = letter.payload?.event;
  write(
    `   event: ${event ? `${String(event["detail-type"])} ${String(event.id)} ${clip(JSON.stringify(event.detail))}` : clip(letter.body)}`,
  );
}

const clip = (text: string, max = 400) =>
  text.length > max ? `${text.slice(0, max)}... (${text.length} chars)` : text;
