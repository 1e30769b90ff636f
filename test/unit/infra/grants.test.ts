import { describe, expect, it } from "vitest";
import { allows, iamLike, TOOL_FUNCTION_GRANTS } from "../../../infra/constructs/grants.ts";
import { authorizationsOf, worldArns } from "../../support/iam-guard.ts";

/**
 * The grants' matching, as IAM reads the stack's statements (infra/constructs/grants.ts), and the
 * SDK calls the offline guard maps to actions (test/support/iam-guard.ts): what the tool function
 * may and may not do.
 */
const arns = worldArns({ resourcesBucket: "res", policiesBucket: "pol", table: "state", bus: "arbor" });
const may = (service: string, command: string, input: Record<string, unknown>) =>
  authorizationsOf(service, command, input, arns).every(
    (n) => allows(TOOL_FUNCTION_GRANTS, arns, n.action, n.resource, n.leadingKey) !== undefined,
  );
const TASK = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1/plan.Task.t1";

describe("IAM's wildcards", () => {
  it("match any run of characters, slashes too, and nothing else", () => {
    expect(iamLike("cld:*/plan.Task.*/common.Message.*", `${TASK}/common.Message.r1.json`)).toBe(true);
    expect(
      iamLike("cld:*/plan.Task.*/common.Message.*", "cld:common.Tenant.acme/common.Message.x.json"),
    ).toBe(false);
    expect(iamLike("R#graph#*", "R#graph#acme#00ff")).toBe(true);
    expect(iamLike("R#graph#*", "R#graphs")).toBe(false);
    expect(iamLike("a.b", "aXb")).toBe(false);
  });
});

describe("the tool function's grants", () => {
  it("read any resource and write only tool results under tasks and Tool resources", () => {
    expect(may("S3", "GetObjectCommand", { Bucket: "res", Key: `${TASK}.json` })).toBe(true);
    expect(may("S3", "PutObjectCommand", { Bucket: "res", Key: `${TASK}/common.Message.r1.json` })).toBe(
      true,
    );
    expect(
      may("S3", "PutObjectCommand", { Bucket: "res", Key: "cld:common.Tenant.acme/common.Tool.calc.json" }),
    ).toBe(true);
    expect(
      may("S3", "DeleteObjectCommand", {
        Bucket: "res",
        Key: "cld:common.Tenant.acme/common.Tool.calc.json",
      }),
    ).toBe(true);
    // A task, an assistant, a conversation: not its to write or delete.
    expect(may("S3", "PutObjectCommand", { Bucket: "res", Key: `${TASK}.json` })).toBe(false);
    expect(
      may("S3", "PutObjectCommand", { Bucket: "res", Key: "cld:common.Tenant.acme/common.Assistant.a.json" }),
    ).toBe(false);
    expect(may("S3", "DeleteObjectCommand", { Bucket: "res", Key: `${TASK}/common.Message.r1.json` })).toBe(
      false,
    );
    expect(may("S3", "GetObjectCommand", { Bucket: "other", Key: "x" })).toBe(false);
  });

  it("write only its own records: the audit log, the registry, the graph, remote calls", () => {
    const put = (pk: string) => ({ TransactItems: [{ Put: { Item: { pk: { S: pk } } } }] });
    for (const pk of [
      `S#audit#${TASK}`,
      "I#evt_1",
      "R#toolregistry#acme",
      "R#graph#acme#ab",
      "R#remote-call#cb1",
    ])
      expect([pk, may("DynamoDB", "TransactWriteItemsCommand", put(pk))]).toEqual([pk, true]);
    for (const pk of [`R#${TASK}`, `S#${TASK}`, `R#usage#${TASK}`, "R#apikey#00", "R#plan#x"])
      expect([pk, may("DynamoDB", "TransactWriteItemsCommand", put(pk))]).toEqual([pk, false]);
    // One item outside them fails the whole transaction.
    expect(
      may("DynamoDB", "TransactWriteItemsCommand", {
        TransactItems: [
          { Put: { Item: { pk: { S: "I#evt_2" } } } },
          { Delete: { Key: { pk: { S: `R#${TASK}` } } } },
        ],
      }),
    ).toBe(false);
    expect(may("DynamoDB", "GetItemCommand", { Key: { pk: { S: `R#${TASK}` } } })).toBe(true);
    expect(may("DynamoDB", "QueryCommand", { IndexName: "byParent" })).toBe(true);
  });
});
