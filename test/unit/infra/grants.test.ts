import { describe, expect, it } from "vitest";
import {
  allows,
  EVAL_STEP_GRANTS,
  type Grant,
  iamLike,
  NOTIFY_GRANTS,
  STEP_GRANTS,
  TOOL_FUNCTION_GRANTS,
} from "../../../infra/constructs/grants.ts";
import { ROUTES } from "../../../shared/engine/routes.ts";
import { authorizationsOf, worldArns } from "../../support/iam-guard.ts";

/**
 * The grants' matching, as IAM reads the stack's statements (infra/constructs/grants.ts), and the
 * SDK calls the offline guard maps to actions (test/support/iam-guard.ts): what the tool function
 * may and may not do.
 */
const arns = worldArns({ resourcesBucket: "res", policiesBucket: "pol", table: "state", bus: "arbor" });
const mayWith =
  (grants: readonly Grant[]) => (service: string, command: string, input: Record<string, unknown>) =>
    authorizationsOf(service, command, input, arns).every(
      (n) => allows(grants, arns, n.action, n.resource, n.leadingKey) !== undefined,
    );
const may = mayWith(TOOL_FUNCTION_GRANTS);
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

describe("the engine steps' grants", () => {
  const put = (pk: string) => ({ TransactItems: [{ Put: { Item: { pk: { S: pk } } } }] });
  const object = (Key: string) => ({ Bucket: "res", Key });

  it("give every route its own, and no step a delete but the documents step its documents' older chunks", () => {
    expect(Object.keys(STEP_GRANTS).sort()).toEqual(ROUTES.map((r) => r.name).sort());
    for (const [route, grants] of [...Object.entries(STEP_GRANTS), ["eval", EVAL_STEP_GRANTS] as const])
      for (const g of grants) {
        const deletes = g.actions.filter((a) => /Delete/.test(a));
        // A re-added document's older chunks go (objects and vectors), under the document only.
        if (route === "documents" && (g.sid === "DocumentObjects" || g.sid === "ChunkVectors")) continue;
        expect([route, g.sid, deletes]).toEqual([route, g.sid, []]);
      }
    const may = mayWith(STEP_GRANTS.documents);
    expect(
      may("S3", "DeleteObjectCommand", object("cld:common.Tenant.acme/doc.Document.d1/doc.Chunk.c1.json")),
    ).toBe(true);
    for (const key of [
      "cld:common.Tenant.acme/common.Assistant.a.json",
      "cld:common.Tenant.acme/common.Conversation.c1.json",
      "cld:common.Tenant.acme.json",
    ]) {
      expect([key, may("S3", "DeleteObjectCommand", object(key))]).toEqual([key, false]);
      expect([key, may("S3", "PutObjectCommand", object(key))]).toEqual([key, false]);
    }
  });

  it("read anything, and write objects only inside a request's tree", () => {
    for (const route of ["plan", "ready", "turn", "resume", "supervise"] as const) {
      const may = mayWith(STEP_GRANTS[route]);
      expect([
        route,
        may("S3", "GetObjectCommand", object("cld:common.Tenant.acme/common.Assistant.a.json")),
      ]).toEqual([route, true]);
      expect([route, may("S3", "PutObjectCommand", object(`${TASK}.json`))]).toEqual([route, true]);
      expect([route, may("S3", "PutObjectCommand", object(`${TASK}/common.Message.r1.json`))]).toEqual([
        route,
        true,
      ]);
      // A tenant's team, assistants, tools, the tenant itself and its conversations are not a step's to write.
      for (const key of [
        "cld:common.Tenant.acme.json",
        "cld:common.Tenant.acme/common.Assistant.a.json",
        "cld:common.Tenant.acme/common.Tool.calc.json",
        "cld:common.Tenant.acme/common.Conversation.c1.json",
        "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1.json",
      ])
        expect([route, key, may("S3", "PutObjectCommand", object(key))]).toEqual([route, key, false]);
      // Its task records, none of the API's (keys, sessions) or the tool function's (registry, graph).
      expect([route, may("DynamoDB", "TransactWriteItemsCommand", put(`S#${TASK}`))]).toEqual([route, true]);
      for (const pk of [
        "R#apikey#00",
        "R#session#s1",
        "R#toolregistry#acme",
        "R#graph#acme#ab",
        "R#request#acme#k",
      ])
        expect([route, pk, may("DynamoDB", "TransactWriteItemsCommand", put(pk))]).toEqual([
          route,
          pk,
          false,
        ]);
    }
  });

  it("let index-output and activity write nothing of the engine's: a vector, an activity's record", () => {
    const index = mayWith(STEP_GRANTS["index-output"]);
    expect(index("S3Vectors", "PutVectorsCommand", {})).toBe(true);
    expect(index("S3", "PutObjectCommand", object(`${TASK}/common.Message.r1.json`))).toBe(false);
    expect(index("DynamoDB", "TransactWriteItemsCommand", put(`S#${TASK}`))).toBe(false);
    expect(index("EventBridge", "PutEventsCommand", {})).toBe(false);
    const activity = mayWith(STEP_GRANTS.activity);
    expect(activity("DynamoDB", "TransactWriteItemsCommand", put(`R#activity#${TASK}#0`))).toBe(true);
    expect(activity("DynamoDB", "TransactWriteItemsCommand", put(`R#${TASK}`))).toBe(false);
    expect(activity("S3", "PutObjectCommand", object(`${TASK}.json`))).toBe(false);
  });
});

describe("the notify function's grants", () => {
  const may = mayWith(NOTIFY_GRANTS);
  const put = (pk: string) => ({ TransactItems: [{ Put: { Item: { pk: { S: pk } } } }] });

  it("read answers and write only the notify path's records, deleting nothing", () => {
    expect(may("S3", "GetObjectCommand", { Bucket: "res", Key: `${TASK}/common.Message.r1.json` })).toBe(
      true,
    );
    expect(may("S3", "PutObjectCommand", { Bucket: "res", Key: `${TASK}/common.Message.r1.json` })).toBe(
      false,
    );
    for (const pk of [
      "R#notify-sub#acme#s1",
      "R#notify-delivery#d1",
      "R#notify-lane#acme",
      "R#chat-thread#t1",
    ])
      expect([pk, may("DynamoDB", "TransactWriteItemsCommand", put(pk))]).toEqual([pk, true]);
    for (const pk of [`R#${TASK}`, `S#${TASK}`, "R#apikey#00", "I#evt_1"])
      expect([pk, may("DynamoDB", "TransactWriteItemsCommand", put(pk))]).toEqual([pk, false]);
    expect(
      may("DynamoDB", "TransactWriteItemsCommand", {
        TransactItems: [{ Delete: { Key: { pk: { S: "R#notify-sub#acme#s1" } } } }],
      }),
    ).toBe(false);
    expect(may("EventBridge", "PutEventsCommand", {})).toBe(false);
  });
});
