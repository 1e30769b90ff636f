import { describe, expect, it } from "vitest";
import { readDeadLetter as readWith } from "../../../../shared/adapters/aws/dead-letters.ts";
import { ROUTES } from "../../../../shared/engine/routes.ts";

const ROUTE_NAMES = new Set(ROUTES.map((r) => r.name));
const readDeadLetter = (message: Parameters<typeof readWith>[0]) => readWith(message, ROUTE_NAMES);

/** What `arbor dlq redrive` makes of each kind of message, before it sends anything. */
const event = {
  id: "evt-1",
  source: "arbor.engine",
  "detail-type": "PlanRequested",
  detail: { taskId: "cld:common.Tenant.acme/common.Conversation.c/plan.Task.t" },
};
const attrs = (a: Record<string, string>) =>
  Object.fromEntries(Object.entries(a).map(([k, v]) => [k, { DataType: "String", StringValue: v }]));
const message = (body: unknown, a: Record<string, string>) => ({
  MessageId: "m1",
  ReceiptHandle: "r1",
  Body: typeof body === "string" ? body : JSON.stringify(body),
  MessageAttributes: attrs(a),
  Attributes: { ApproximateReceiveCount: "3", SentTimestamp: "1795636800000" },
});
const rule = (name: string) => `arn:aws:events:us-east-1:123456789012:rule/arbor-dev/${name}`;
const target = "arn:aws:lambda:us-east-1:123456789012:function:arbor-dev-plan";

describe("a dead letter", () => {
  it("moved by a notify queue's redrive policy goes back to that queue as it is, attributes and all", () => {
    const source = "arn:aws:sqs:us-east-1:123456789012:arbor-dev-engine-NotifyDeliveryQueue";
    const m = message({ deliveryId: "dlv_abc" }, { "arbor-message": "notify.delivery" });
    const letter = readDeadLetter({
      ...m,
      Attributes: { ...m.Attributes, DeadLetterQueueSourceArn: source },
    });
    expect(letter).toMatchObject({
      origin: "sqs",
      sourceQueueArn: source,
      route: "notify.delivery",
      body: JSON.stringify({ deliveryId: "dlv_abc" }),
      attributes: attrs({ "arbor-message": "notify.delivery" }),
    });
    expect(letter.problem).toBeUndefined();
    // A wake-up (the event as the body, no attribute of ours) is named by its queue.
    const wake = readDeadLetter({
      ...message(event, {}),
      Attributes: { DeadLetterQueueSourceArn: "arn:aws:sqs:us-east-1:123456789012:arbor-wake" },
    });
    expect(wake).toMatchObject({ origin: "sqs", route: "arbor-wake", body: JSON.stringify(event) });
  });

  it("from Lambda goes back with its payload to the function of its route", () => {
    expect(
      readDeadLetter(
        message({ subscription: "plan", event }, { RequestID: "q", ErrorCode: "200", ErrorMessage: "boom" }),
      ),
    ).toEqual({
      messageId: "m1",
      receiptHandle: "r1",
      body: JSON.stringify({ subscription: "plan", event }),
      receiveCount: 3,
      sentAt: "2026-11-25T20:00:00.000Z",
      origin: "lambda",
      route: "plan",
      errors: { RequestID: "q", ErrorCode: "200", ErrorMessage: "boom" },
      payload: { subscription: "plan", event },
    });
  });

  it("from EventBridge goes to its target as the rule's input, whether the body is the event or already the input", () => {
    const eb = {
      RULE_ARN: rule("plan"),
      TARGET_ARN: target,
      ERROR_CODE: "Lambda.ServiceException",
      ERROR_MESSAGE: "x",
    };
    for (const body of [event, { subscription: "plan", event }]) {
      expect(readDeadLetter(message(body, eb))).toMatchObject({
        origin: "eventbridge",
        route: "plan",
        functionArn: target,
        ruleArn: rule("plan"),
        errors: { ERROR_CODE: "Lambda.ServiceException", ERROR_MESSAGE: "x" },
        payload: { subscription: "plan", event },
      });
    }
  });

  it("that cannot be sent back says why, and carries nothing to send", () => {
    const cases: [unknown, Record<string, string>, RegExp][] = [
      [
        event,
        { RULE_ARN: rule("deploy"), TARGET_ARN: target },
        /rule .*deploy is not a route of this engine/,
      ],
      [event, { RULE_ARN: rule("plan") }, /EventBridge named no TARGET_ARN/],
      ["not json", { RULE_ARN: rule("plan"), TARGET_ARN: target }, /the body is not an EventBridge event/],
      [{ subscription: "plan" }, { ErrorCode: "200" }, /not a step's input/],
      [{ subscription: "deploy", event }, { ErrorCode: "200" }, /deploy is not a route of this engine/],
      ["hello", {}, /neither Lambda's nor EventBridge's error attributes/],
    ];
    for (const [body, a, why] of cases) {
      const letter = readDeadLetter(message(body, a));
      expect(letter.problem).toMatch(why);
      expect(letter.payload).toBeUndefined();
    }
  });
});
