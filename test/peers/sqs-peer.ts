/**
 * A local Amazon SQS peer for tests: an HTTP server that speaks the part of SQS's JSON protocol
 * (awsJson1_0, query-compatible) that the AWS SDK v3 client (`@aws-sdk/client-sqs` 3.x) uses for
 * SendMessage, SendMessageBatch, ReceiveMessage, DeleteMessage, ChangeMessageVisibility,
 * GetQueueAttributes and GetQueueUrl, so
 * the real client can be pointed at it (`endpoint` = the peer, any region, dummy credentials).
 *
 * Protocol: `POST /` with `X-Amz-Target: AmazonSQS.<Operation>` and
 * `Content-Type: application/x-amz-json-1.0`; the queue is named by `QueueUrl` in the body. Errors
 * are JSON bodies with `__type` (`com.amazonaws.sqs#QueueDoesNotExist`, ...) and `message`, plus
 * the `x-amzn-query-error` header (`AWS.SimpleQueueService.NonExistentQueue;Sender`), as SQS sends
 * them. The client checks `MD5OfBody` / `MD5OfMessageBody`: the peer computes them.
 *
 * Like SQS: a received message is invisible for its visibility timeout (the request's
 * `VisibilityTimeout`, else 30 s) and then visible again with a new receipt handle;
 * ReceiveMessage returns at most `MaxNumberOfMessages` (1-10) visible messages, oldest first, with
 * `ApproximateReceiveCount` and `SentTimestamp`; DeleteMessage needs the latest receipt handle;
 * an unknown receipt handle is `ReceiptHandleIsInvalid`. `DelaySeconds` (0-900, per message or per
 * batch entry) hides a message that long after it is sent. SendMessageBatch takes 1-10 entries with
 * distinct ids and answers `Successful` / `Failed` per entry. A queue given a redrive policy
 * (`redrive(url, deadLetterUrl, maxReceiveCount)`) moves a message received that many times to the
 * dead-letter queue instead of handing it out again, with the `DeadLetterQueueSourceArn` system
 * attribute naming the source queue, as SQS does. Unlike SQS: long polling does not wait
 * (an empty queue answers at once), there is no sampling (every visible message can be received),
 * and SigV4 signatures are not verified (an `Authorization` header must be present).
 *
 * Test hooks: `start()`, `close()`, `createQueue(name)` (its URL), `arnOf(url)`, `redrive(...)`,
 * `take(url, messageId)` (as an event source mapping takes it: in flight for good),
 * `messages(url)` (what the queue holds), `showDelayed(url)` (delayed and in-flight messages visible
 * now: what waiting would do), `lose(url, predicate)` (messages dropped), `calls` (every request's
 * operation).
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { SQSClient } from "@aws-sdk/client-sqs";

export interface MessageAttribute {
  DataType: string;
  StringValue?: string;
}

export interface QueuedMessage {
  messageId: string;
  body: string;
  attributes: Record<string, MessageAttribute>;
  sentAt: number;
  receiveCount: number;
  invisibleUntil: number;
  receiptHandle: string | undefined;
  /** Set when a redrive policy moved it here: the source queue's ARN. */
  deadLetterSourceArn?: string;
}

type Json = Record<string, unknown>;

class SqsError extends Error {
  readonly type: string;
  readonly queryCode: string;
  readonly status: number;

  constructor(type: string, queryCode: string, message: string, status = 400) {
    super(message);
    this.type = type;
    this.queryCode = queryCode;
    this.status = status;
  }
}

const ACCOUNT = "123456789012";
const md5 = (text: string) => createHash("md5").update(text, "utf8").digest("hex");

export class SqsPeer {
  readonly calls: string[] = [];
  readonly #queues = new Map<string, QueuedMessage[]>();
  readonly #redrives = new Map<string, { deadLetterUrl: string; maxReceiveCount: number }>();
  readonly #server: Server;
  #endpoint = "";

  private constructor() {
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((e: unknown) => {
        if (!res.headersSent) reply(res, 500, { __type: "InternalError", message: String(e) });
      });
    });
  }

  static async start(): Promise<SqsPeer> {
    const peer = new SqsPeer();
    await new Promise<void>((resolve) => peer.#server.listen(0, "127.0.0.1", resolve));
    peer.#endpoint = `http://127.0.0.1:${(peer.#server.address() as AddressInfo).port}`;
    return peer;
  }

  get endpoint(): string {
    return this.#endpoint;
  }

  /** A queue; its URL names it as SQS's do (`<endpoint>/<account>/<name>`). */
  createQueue(name: string): string {
    const url = `${this.#endpoint}/${ACCOUNT}/${name}`;
    if (!this.#queues.has(url)) this.#queues.set(url, []);
    return url;
  }

  /** The queue's ARN (`arn:aws:sqs:<region>:<account>:<name>`). */
  arnOf(url: string, region = "us-east-1"): string {
    return `arn:aws:sqs:${region}:${ACCOUNT}:${url.split("/").pop() ?? ""}`;
  }

  /** A redrive policy: a message received `maxReceiveCount` times goes to `deadLetterUrl` on its next receive. */
  redrive(url: string, deadLetterUrl: string, maxReceiveCount: number): void {
    this.#redrives.set(url, { deadLetterUrl, maxReceiveCount });
  }

  /** Makes every message of the queue visible now (delays and visibility timeouts over): what waiting would do. */
  showDelayed(url: string): void {
    for (const m of this.#queues.get(url) ?? []) m.invisibleUntil = 0;
  }

  /**
   * A message taken as an event source mapping takes it (a test's player of one): in flight from
   * now on (ApproximateNumberOfMessagesNotVisible, not ApproximateNumberOfMessages), never handed
   * out again; `lose` it once its step is done, as the mapping deletes it.
   */
  take(url: string, messageId: string): void {
    for (const m of this.#queues.get(url) ?? [])
      if (m.messageId === messageId) m.invisibleUntil = Number.POSITIVE_INFINITY;
  }

  /** Drops the messages `lost` picks (a message lost in transit); returns how many. */
  lose(url: string, lost: (m: QueuedMessage) => boolean): number {
    const queue = this.#queues.get(url) ?? [];
    const kept = queue.filter((m) => !lost(m));
    const n = queue.length - kept.length;
    queue.splice(0, queue.length, ...kept);
    return n;
  }

  /** What the queue holds, in flight or not. */
  messages(url: string): readonly QueuedMessage[] {
    return this.#queues.get(url) ?? [];
  }

  /** The real SDK client, pointed at this peer with dummy credentials. */
  client(region = "us-east-1"): SQSClient {
    return new SQSClient({
      endpoint: this.#endpoint,
      region,
      credentials: { accessKeyId: "AKIDSQSPEER", secretAccessKey: "sqs-peer-secret" },
      maxAttempts: 1,
    });
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise((r) => this.#server.close(r));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const target = String(req.headers["x-amz-target"] ?? "");
    const operation = target.startsWith("AmazonSQS.") ? target.slice("AmazonSQS.".length) : target;
    this.calls.push(operation);
    try {
      if (
        req.method !== "POST" ||
        !String(req.headers["content-type"] ?? "").startsWith("application/x-amz-json-1.0")
      )
        throw new SqsError(
          "com.amazonaws.sqs#InvalidAddress",
          "InvalidAddress",
          "Expected a JSON 1.0 POST",
          404,
        );
      if (!req.headers.authorization)
        throw new SqsError(
          "MissingAuthenticationToken",
          "MissingAuthenticationToken",
          "Missing Authentication Token",
          403,
        );
      const input = (raw ? JSON.parse(raw) : {}) as Json;
      reply(res, 200, this.#operation(operation, input));
    } catch (e) {
      if (!(e instanceof SqsError)) throw e;
      reply(
        res,
        e.status,
        { __type: e.type, message: e.message },
        { "x-amzn-query-error": `${e.queryCode};Sender` },
      );
    }
  }

  #operation(operation: string, input: Json): Json {
    switch (operation) {
      case "SendMessage":
        return this.#send(input);
      case "SendMessageBatch":
        return this.#sendBatch(input);
      case "GetQueueUrl": {
        const name = String(input.QueueName ?? "");
        const url = `${this.#endpoint}/${String(input.QueueOwnerAWSAccountId ?? ACCOUNT)}/${name}`;
        if (!this.#queues.has(url))
          throw new SqsError(
            "com.amazonaws.sqs#QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
            "The specified queue does not exist.",
          );
        return { QueueUrl: url };
      }
      case "ReceiveMessage":
        return this.#receive(input);
      case "DeleteMessage":
        this.#queue(input).splice(this.#indexOf(input), 1);
        return {};
      case "ChangeMessageVisibility": {
        const message = this.#queue(input)[this.#indexOf(input)] as QueuedMessage;
        message.invisibleUntil =
          Date.now() + seconds(input.VisibilityTimeout, 0, 43_200, "VisibilityTimeout") * 1000;
        return {};
      }
      case "GetQueueAttributes": {
        const queue = this.#queue(input);
        const now = Date.now();
        return {
          Attributes: {
            ApproximateNumberOfMessages: String(queue.filter((m) => m.invisibleUntil <= now).length),
            ApproximateNumberOfMessagesNotVisible: String(queue.filter((m) => m.invisibleUntil > now).length),
          },
        };
      }
      default:
        throw new SqsError(
          "com.amazonaws.sqs#UnsupportedOperation",
          "AWS.SimpleQueueService.UnsupportedOperation",
          `The SQS peer does not do ${operation}`,
        );
    }
  }

  #queue(input: Json): QueuedMessage[] {
    const queue = typeof input.QueueUrl === "string" ? this.#queues.get(input.QueueUrl) : undefined;
    if (!queue)
      throw new SqsError(
        "com.amazonaws.sqs#QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist.",
      );
    return queue;
  }

  #send(input: Json): Json {
    const queue = this.#queue(input);
    const message = this.#message(input);
    queue.push(message);
    return { MessageId: message.messageId, MD5OfMessageBody: md5(message.body) };
  }

  #message(input: Json): QueuedMessage {
    if (typeof input.MessageBody !== "string" || input.MessageBody.length === 0)
      throw new SqsError(
        "com.amazonaws.sqs#InvalidParameterValue",
        "InvalidParameterValue",
        "MessageBody is required",
      );
    const delay = input.DelaySeconds === undefined ? 0 : seconds(input.DelaySeconds, 0, 900, "DelaySeconds");
    const now = Date.now();
    return {
      messageId: randomUUID(),
      body: input.MessageBody,
      attributes: (input.MessageAttributes ?? {}) as Record<string, MessageAttribute>,
      sentAt: now,
      receiveCount: 0,
      invisibleUntil: delay > 0 ? now + delay * 1000 : 0,
      receiptHandle: undefined,
    };
  }

  #sendBatch(input: Json): Json {
    const queue = this.#queue(input);
    const entries = Array.isArray(input.Entries) ? (input.Entries as Json[]) : [];
    if (entries.length === 0)
      throw new SqsError(
        "com.amazonaws.sqs#EmptyBatchRequest",
        "AWS.SimpleQueueService.EmptyBatchRequest",
        "There should be at least one SendMessageBatchRequestEntry in the request.",
      );
    if (entries.length > 10)
      throw new SqsError(
        "com.amazonaws.sqs#TooManyEntriesInBatchRequest",
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
        `Maximum number of entries per request are 10. You have sent ${entries.length}.`,
      );
    if (new Set(entries.map((e) => e.Id)).size !== entries.length)
      throw new SqsError(
        "com.amazonaws.sqs#BatchEntryIdsNotDistinct",
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        "Two or more batch entries in the request have the same Id.",
      );
    const successful: Json[] = [];
    const failed: Json[] = [];
    for (const entry of entries) {
      try {
        const message = this.#message(entry);
        queue.push(message);
        successful.push({ Id: entry.Id, MessageId: message.messageId, MD5OfMessageBody: md5(message.body) });
      } catch (e) {
        if (!(e instanceof SqsError)) throw e;
        failed.push({ Id: entry.Id, SenderFault: true, Code: e.queryCode, Message: e.message });
      }
    }
    return { Successful: successful, Failed: failed };
  }

  #receive(input: Json): Json {
    const queue = this.#queue(input);
    const max =
      input.MaxNumberOfMessages === undefined
        ? 1
        : seconds(input.MaxNumberOfMessages, 1, 10, "MaxNumberOfMessages");
    const visibility =
      input.VisibilityTimeout === undefined
        ? 30
        : seconds(input.VisibilityTimeout, 0, 43_200, "VisibilityTimeout");
    const names = [...((input.MessageSystemAttributeNames ?? input.AttributeNames ?? []) as string[])];
    const wanted = (input.MessageAttributeNames ?? []) as string[];
    const now = Date.now();
    const out: Json[] = [];
    const redrive = this.#redrives.get(String(input.QueueUrl));
    for (const m of [...queue]) {
      if (out.length >= max) break;
      if (m.invisibleUntil > now) continue;
      if (redrive && m.receiveCount >= redrive.maxReceiveCount) {
        // Received maxReceiveCount times and back: SQS moves it to the dead-letter queue.
        queue.splice(queue.indexOf(m), 1);
        this.#queues.get(redrive.deadLetterUrl)?.push({
          ...m,
          invisibleUntil: 0,
          receiveCount: 0,
          receiptHandle: undefined,
          deadLetterSourceArn: this.arnOf(String(input.QueueUrl)),
        });
        continue;
      }
      m.receiveCount++;
      m.invisibleUntil = now + visibility * 1000;
      m.receiptHandle = randomUUID();
      const attrs = Object.fromEntries(
        Object.entries(m.attributes).filter(([k]) => wanted.includes("All") || wanted.includes(k)),
      );
      const system: Record<string, string> = {};
      if (names.includes("All") || names.includes("ApproximateReceiveCount"))
        system.ApproximateReceiveCount = String(m.receiveCount);
      if (names.includes("All") || names.includes("SentTimestamp")) system.SentTimestamp = String(m.sentAt);
      if ((names.includes("All") || names.includes("DeadLetterQueueSourceArn")) && m.deadLetterSourceArn)
        system.DeadLetterQueueSourceArn = m.deadLetterSourceArn;
      out.push({
        MessageId: m.messageId,
        ReceiptHandle: m.receiptHandle,
        MD5OfBody: md5(m.body),
        Body: m.body,
        ...(Object.keys(system).length ? { Attributes: system } : {}),
        ...(Object.keys(attrs).length ? { MessageAttributes: attrs } : {}),
      });
    }
    return out.length ? { Messages: out } : {};
  }

  #indexOf(input: Json): number {
    const queue = this.#queue(input);
    const index = queue.findIndex(
      (m) => m.receiptHandle !== undefined && m.receiptHandle === input.ReceiptHandle,
    );
    if (index < 0)
      throw new SqsError(
        "com.amazonaws.sqs#ReceiptHandleIsInvalid",
        "ReceiptHandleIsInvalid",
        `The input receipt handle "${String(input.ReceiptHandle)}" is not a valid receipt handle.`,
      );
    return index;
  }
}

function seconds(value: unknown, min: number, max: number, name: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max)
    throw new SqsError(
      "com.amazonaws.sqs#InvalidParameterValue",
      "InvalidParameterValue",
      `Value ${String(value)} for parameter ${name} is invalid. Reason: Must be between ${min} and ${max}.`,
    );
  return value;
}

function reply(res: ServerResponse, status: number, body: Json, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/x-amz-json-1.0",
    "content-length": Buffer.byteLength(text),
    "x-amzn-requestid": randomUUID(),
    ...headers,
  });
  res.end(text);
}
