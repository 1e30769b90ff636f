import { EventBridgeClient, PutRuleCommand, PutTargetsCommand } from "@aws-sdk/client-eventbridge";
import { ReceiveMessageCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dlqCommand } from "../../cli/lib/dlq.ts";
import { SqsCommandQueues } from "../../shared/adapters/aws/sqs-command-queues.ts";
import { ROUTES } from "../../shared/engine/routes.ts";
import { loadOperatorSettings } from "../../shared/runtime/config.ts";
import { EventBridgePeer } from "../peers/eventbridge-peer.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";
import { arborCli } from "../support/arbor-process.ts";

/**
 * `arbor dlq redrive` against real clients and local peers: the SQS peer holds the dead-letter
 * queue, the EventBridge peer the routes' rules (which name each route's function), the Lambda
 * peer receives the resends. The two kinds of message the engine's queue gets are seeded as Lambda
 * and EventBridge write them (body and attributes), with the real SQS client.
 */
const ACCOUNT = "123456789012";
const BUS = "arbor-dev";
const fnArn = (name: string) => `arn:aws:lambda:us-east-1:${ACCOUNT}:function:${name}`;

let sqsPeer: SqsPeer;
let lambdaPeer: LambdaInvokePeer;
let busPeer: EventBridgePeer;
let sqs: SQSClient;
let events: EventBridgeClient;

const event = (detailType: string, taskId: string) => ({
  version: "0",
  id: `evt-${taskId}`,
  source: "arbor.engine",
  "detail-type": detailType,
  account: ACCOUNT,
  time: "2026-11-25T20:00:00Z",
  region: "us-east-1",
  resources: [],
  detail: {
    taskId: `cld:common.Tenant.acme/common.Conversation.c1/plan.Task.${taskId}`,
    eventId: `e-${taskId}`,
  },
});
const planEvent = event("PlanRequested", "t1");
const turnEvent = event("TurnRequested", "t2");

/** A step invocation that failed every Lambda attempt, as Lambda's DLQ writes it. */
const lambdaFailure = (payload: unknown) =>
  new SendMessageCommand({
    QueueUrl: "",
    MessageBody: JSON.stringify(payload),
    MessageAttributes: {
      RequestID: { DataType: "String", StringValue: "9f2b6c1e-0000-4000-8000-000000000001" },
      ErrorCode: { DataType: "Number", StringValue: "200" },
      ErrorMessage: { DataType: "String", StringValue: "ThrottlingException: Rate exceeded" },
    },
  });
/** An event EventBridge could not hand to the rule's function, as EventBridge's DLQ writes it. */
const eventBridgeFailure = (rule: string, target: string, body: unknown) =>
  new SendMessageCommand({
    QueueUrl: "",
    MessageBody: JSON.stringify(body),
    MessageAttributes: {
      RULE_ARN: {
        DataType: "String",
        StringValue: `arn:aws:events:us-east-1:${ACCOUNT}:rule/${BUS}/${rule}`,
      },
      TARGET_ARN: { DataType: "String", StringValue: target },
      ERROR_CODE: { DataType: "String", StringValue: "Lambda.TooManyRequestsException" },
      ERROR_MESSAGE: { DataType: "String", StringValue: "Rate Exceeded." },
      EXHAUSTED_RETRY_CONDITION: { DataType: "String", StringValue: "MaximumRetryAttempts" },
      RETRY_ATTEMPTS: { DataType: "String", StringValue: "8" },
    },
  });

async function seed(queueUrl: string, commands: SendMessageCommand[]): Promise<void> {
  for (const c of commands) {
    c.input.QueueUrl = queueUrl;
    await sqs.send(c);
  }
}

const env = (queueUrl: string): NodeJS.ProcessEnv => ({
  ...process.env,
  NO_COLOR: "1",
  AWS_REGION: "us-east-1",
  AWS_ACCESS_KEY_ID: "AKIDTEST",
  AWS_SECRET_ACCESS_KEY: "test-secret",
  ARBOR_DLQ_URL: queueUrl,
  ARBOR_EVENT_BUS_NAME: BUS,
  ARBOR_SQS_ENDPOINT: sqsPeer.endpoint,
  ARBOR_LAMBDA_ENDPOINT: lambdaPeer.endpoint,
  ARBOR_EVENTBRIDGE_ENDPOINT: busPeer.endpoint,
});

beforeAll(async () => {
  sqsPeer = await SqsPeer.start();
  sqs = sqsPeer.client();
  lambdaPeer = await LambdaInvokePeer.start(
    { "arbor-plan": () => null, "arbor-turn": () => null, "arbor-ready": () => null },
    { denied: ["arbor-ready"] },
  );
  busPeer = new EventBridgePeer({ account: ACCOUNT });
  const { endpoint } = await busPeer.start();
  events = new EventBridgeClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDTEST", secretAccessKey: "test-secret" },
  });
  // The routes' rules as the engine stack makes them: one per route, targeting its function.
  for (const route of ROUTES.filter((r) => ["plan", "turn", "ready"].includes(r.name))) {
    await events.send(
      new PutRuleCommand({
        Name: route.name,
        EventBusName: BUS,
        EventPattern: JSON.stringify(route.pattern),
      }),
    );
    await events.send(
      new PutTargetsCommand({
        Rule: route.name,
        EventBusName: BUS,
        Targets: [{ Id: "Target0", Arn: fnArn(`arbor-${route.name}`) }],
      }),
    );
  }
});
afterAll(async () => {
  await sqsPeer?.close();
  await lambdaPeer?.close();
  await busPeer?.stop();
});

describe("arbor dlq redrive", () => {
  it("shows each message, sends each back to its function with the original payload, and deletes only what was sent", async () => {
    const queueUrl = sqsPeer.createQueue("arbor-dlq-main");
    await seed(queueUrl, [
      lambdaFailure({ subscription: "plan", event: planEvent }),
      eventBridgeFailure("turn", fnArn("arbor-turn"), turnEvent),
      new SendMessageCommand({ QueueUrl: "", MessageBody: "not from Arbor" }),
    ]);

    const dry = await arborCli(["dlq", "redrive", "--dry-run"], env(queueUrl));
    expect(dry.stderr).not.toContain("arbor:");
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain("from: a step's invocation that failed every Lambda attempt");
    expect(dry.stdout).toContain(`route: plan, function ${fnArn("arbor-plan")}`);
    expect(dry.stdout).toContain(
      "errors: RequestID=9f2b6c1e-0000-4000-8000-000000000001; ErrorCode=200; ErrorMessage=ThrottlingException: Rate exceeded",
    );
    expect(dry.stdout).toContain(
      `from: an event EventBridge could not deliver (rule arn:aws:events:us-east-1:${ACCOUNT}:rule/${BUS}/turn)`,
    );
    expect(dry.stdout).toContain(
      "errors: ERROR_CODE=Lambda.TooManyRequestsException; ERROR_MESSAGE=Rate Exceeded.; EXHAUSTED_RETRY_CONDITION=MaximumRetryAttempts; RETRY_ATTEMPTS=8",
    );
    expect(dry.stdout).toContain(`event: TurnRequested evt-t2 ${JSON.stringify(turnEvent.detail)}`);
    expect(dry.stdout).toContain("Dry run: 3 messages shown; nothing sent or deleted.");
    // Nothing sent, nothing deleted, and every message visible again for the real run.
    expect(lambdaPeer.invocations).toEqual([]);
    expect(sqsPeer.messages(queueUrl).map((m) => m.invisibleUntil <= Date.now())).toEqual([true, true, true]);

    const run = await arborCli(["dlq", "redrive"], env(queueUrl));
    expect(run.stderr).not.toContain("arbor:");
    // One message could not be sent anywhere: the run says so with its exit code.
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      `sent back to ${fnArn("arbor-plan")} (asynchronous invocation); deleted from the queue`,
    );
    expect(run.stdout).toContain(
      `sent back to ${fnArn("arbor-turn")} (asynchronous invocation); deleted from the queue`,
    );
    expect(run.stdout).toContain("left in the queue: neither Lambda's nor EventBridge's error attributes");
    expect(run.stdout).toContain("Redrive: 2 of 3 sent back and deleted; 1 left in the queue.");
    expect(lambdaPeer.invocations.map((i) => [i.functionName, i.invocationType, i.payload])).toEqual([
      [fnArn("arbor-plan"), "Event", { subscription: "plan", event: planEvent }],
      // EventBridge's message holds the event: the payload is what the rule's input transformer makes of it.
      [fnArn("arbor-turn"), "Event", { subscription: "turn", event: turnEvent }],
    ]);
    expect(sqsPeer.messages(queueUrl).map((m) => m.body)).toEqual(["not from Arbor"]);
  });

  it("sends a command its step failed every time back to the step's queue, as it was", async () => {
    const queueUrl = sqsPeer.createQueue("arbor-dlq-commands");
    const readyQueue = sqsPeer.createQueue("arbor-ready-commands");
    sqsPeer.redrive(readyQueue, queueUrl, 3);
    // The command as the engine sends it (the real adapter), failed by its step three times.
    const commands = new SqsCommandQueues({
      client: sqs,
      queues: { TASK_READY: { subscription: "ready", queueUrl: readyQueue } },
      account: ACCOUNT,
      region: "us-east-1",
    });
    await commands.send([
      { id: "cmd-ready-t3", source: "arbor.engine", detailType: "TASK_READY", detail: { taskId: "t3" } },
    ]);
    const sent = sqsPeer.messages(readyQueue)[0]?.body;
    for (let i = 0; i < 4; i++)
      await sqs.send(new ReceiveMessageCommand({ QueueUrl: readyQueue, VisibilityTimeout: 0 }));
    expect(sqsPeer.messages(readyQueue)).toEqual([]);
    expect(sqsPeer.messages(queueUrl)).toHaveLength(1);

    const dry = await arborCli(["dlq", "redrive", "--dry-run"], env(queueUrl));
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain("from: a command its step failed every time, moved from its queue");
    expect(dry.stdout).toContain("route: ready");
    expect(dry.stdout).toContain("event: TASK_READY");

    const run = await arborCli(["dlq", "redrive"], env(queueUrl));
    expect(run.stderr).not.toContain("arbor:");
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("sent back to queue arbor-ready-commands");
    // Back in its queue as it was: the step takes the same input, with the same event id.
    const back = sqsPeer.messages(readyQueue);
    expect(back.map((m) => m.body)).toEqual([sent]);
    expect(back[0]?.attributes["arbor-message"]?.StringValue).toBe("engine.command");
    expect(sqsPeer.messages(queueUrl)).toEqual([]);
  });

  it("leaves a message whose resend fails in the queue, and stops at --max", async () => {
    const queueUrl = sqsPeer.createQueue("arbor-dlq-denied");
    await seed(queueUrl, [
      lambdaFailure({ subscription: "ready", event: event("TaskReady", "t3") }),
      lambdaFailure({ subscription: "plan", event: event("PlanRequested", "t4") }),
      lambdaFailure({ subscription: "plan", event: event("PlanRequested", "t5") }),
    ]);
    const lines: string[] = [];
    const settings = loadOperatorSettings({ ARBOR_DLQ_URL: queueUrl, ARBOR_EVENT_BUS_NAME: BUS });
    const clients = { sqs, lambda: lambdaPeer.client(), events };
    const before = lambdaPeer.invocations.length;
    const code = await dlqCommand(
      "redrive",
      { queue: undefined, bus: undefined, dryRun: false, max: "2" },
      settings,
      (l) => lines.push(l),
      clients,
    );
    expect(code).toBe(1);
    expect(lines.join("\n")).toMatch(
      /left in the queue: .*AccessDeniedException|left in the queue: .*not authorized to perform: lambda:InvokeFunction/,
    );
    expect(lines.join("\n")).toContain("Redrive: 1 of 2 sent back and deleted; 1 left in the queue.");
    expect(lambdaPeer.invocations.slice(before).map((i) => i.name)).toEqual(["arbor-plan"]);
    // The refused one and the one past --max are still there, the refused one visible again.
    expect(
      sqsPeer.messages(queueUrl).map((m) => (JSON.parse(m.body) as { event: { id: string } }).event.id),
    ).toEqual(["evt-t3", "evt-t5"]);
    await expect(
      dlqCommand(
        "redrive",
        { queue: undefined, bus: undefined, dryRun: false, max: "0" },
        settings,
        () => {},
        clients,
      ),
    ).rejects.toThrow(/--max is a whole number of messages, at least 1/);
    await expect(
      dlqCommand(
        "redrive",
        { queue: undefined, bus: undefined, dryRun: false, max: undefined },
        loadOperatorSettings({}),
        () => {},
        clients,
      ),
    ).rejects.toThrow(/--queue <url> or ARBOR_DLQ_URL/);
  });
});
