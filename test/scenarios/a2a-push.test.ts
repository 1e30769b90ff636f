import { TaskState } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NotifyService } from "../../shared/notify/service.ts";
import { SUB_KIND } from "../../shared/notify/subscriptions.ts";
import { notifyUrls } from "../../shared/notify/urls.ts";
import { collectPages } from "../../shared/ports/state-store.ts";
import type { LocalNotify } from "../../shared/runtime/local/local-notify.ts";
import {
  ANSWER,
  a2aClient,
  ada,
  intruder,
  partner,
  root,
  rootOf,
  send,
  serveA2a,
  userMessage,
} from "./a2a-fixtures.ts";
import type { Harness } from "./engine-harness.ts";
import {
  type PushWorld,
  type Receiver,
  startPushWorld,
  startReceiver,
  stopPushWorld,
  until,
} from "./notify-fixture.ts";

/**
 * A2A push notifications (1.0) end to end: the SDK's own client sends with a push config and
 * returnImmediately, and uses the config methods; a real webhook receiver on loopback (the
 * operator's development switch on) gets the Task with the caller's token; URLs the guard refuses
 * (private, metadata, loopback without the switch, a redirect) get nothing sent.
 */
let h: Harness;
let notify: LocalNotify;
let served: Awaited<ReturnType<typeof serveA2a>>;
let receiver: Receiver;

let world: PushWorld | undefined;
beforeAll(async () => {
  world = await startPushWorld();
  ({ h, notify, served, receiver } = world);
});
afterAll(() => stopPushWorld(world));

const pushConfig = (url: string, token = "", authentication?: { scheme: string; credentials: string }) => ({
  tenant: "",
  id: "",
  taskId: "",
  url,
  token,
  authentication,
});

interface PushedTask {
  task: {
    id: string;
    contextId: string;
    status: { state: string };
    artifacts?: { parts: { text?: string; data?: unknown }[] }[];
  };
}
const pushedTo = (path: string) =>
  receiver.got.filter((r) => r.path === path).map((r) => ({ ...r, json: JSON.parse(r.body) as PushedTask }));

async function sendWithPush(
  c: Client,
  text: string,
  config: ReturnType<typeof pushConfig>,
  modes: string[] = [],
) {
  const result = await c.sendMessage({
    tenant: "",
    message: userMessage(text),
    configuration: {
      acceptedOutputModes: modes,
      taskPushNotificationConfig: config,
      returnImmediately: true,
    },
    metadata: undefined,
  });
  if (!("status" in result)) throw new Error("expected a task");
  return result;
}

const subscriptionCount = async () =>
  (await collectPages((cursor) => h.rt.state.byStatus(SUB_KIND, "open", cursor ? { cursor } : {}))).length +
  (await collectPages((cursor) => h.rt.state.byStatus(SUB_KIND, "done", cursor ? { cursor } : {}))).length;

describe("A2A push notifications", () => {
  it("the card says it pushes", async () => {
    const card = (await (await fetch(`${served.url}/.well-known/agent-card.json`)).json()) as {
      capabilities: { pushNotifications?: boolean };
    };
    expect(card.capabilities.pushNotifications).toBe(true);
  });

  it("a send with a push config and returnImmediately: the webhook receives the final Task with the bearer token and the answer", async () => {
    const c = await a2aClient(ada.key, served.url);
    const ack = await sendWithPush(
      c,
      "What is the cost per person?",
      pushConfig(`${receiver.url}/push/1`, "tok-1"),
      ["text/plain"],
    );
    expect([
      TaskState.TASK_STATE_SUBMITTED,
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_COMPLETED,
    ]).toContain(ack.status?.state);
    await until("the completed push", () =>
      pushedTo("/push/1").some((p) => p.json.task.status.state === "TASK_STATE_COMPLETED"),
    );
    const pushes = pushedTo("/push/1");
    for (const p of pushes) {
      expect(p.headers.authorization).toBe("Bearer tok-1");
      expect(p.headers["x-a2a-notification-token"]).toBe("tok-1");
      expect(p.headers["content-type"]).toMatch(/^application\/a2a\+json/);
      expect(p.json.task.id).toBe(ack.id);
      expect(p.json.task.contextId).toBe(ack.contextId);
    }
    expect(new Set(pushes.map((p) => p.headers["arbor-delivery-id"])).size).toBe(pushes.length);
    const done = pushes.find((p) => p.json.task.status.state === "TASK_STATE_COMPLETED");
    expect(done?.json.task.artifacts?.[0]?.parts[0]?.text).toBe(ANSWER);
  });

  it("a question and its answer: the webhook is told input-required (the question), then completed", async () => {
    const c = await a2aClient(ada.key, served.url);
    const ack = await sendWithPush(
      c,
      "Email the team about the offsite",
      pushConfig(`${receiver.url}/push/q`, "tok-q"),
    );
    await until("the input-required push", () =>
      pushedTo("/push/q").some((p) => p.json.task.status.state === "TASK_STATE_INPUT_REQUIRED"),
    );
    const asked = pushedTo("/push/q").find((p) => p.json.task.status.state === "TASK_STATE_INPUT_REQUIRED");
    expect(JSON.stringify(asked?.json.task.status)).toMatch(/approve \(Allow\)/);
    await send(c, userMessage("approve", { taskId: ack.id, contextId: ack.contextId }));
    await until("the completed push", () =>
      pushedTo("/push/q").some((p) => p.json.task.status.state === "TASK_STATE_COMPLETED"),
    );
    const states = pushedTo("/push/q").map((p) => p.json.task.status.state);
    expect(states.at(-1)).toBe("TASK_STATE_COMPLETED");
    expect(states.filter((x) => x === "TASK_STATE_INPUT_REQUIRED")).toHaveLength(1);
    expect(new Set(pushedTo("/push/q").map((p) => p.headers["arbor-delivery-id"])).size).toBe(states.length);
  });

  it("the config methods: create (on a finished task: told at once), get, list, delete; a scheme's credentials as the Authorization", async () => {
    const c = await a2aClient(ada.key, served.url);
    const task = await send(c, userMessage("What is the cost per person?"));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const created = await c.createTaskPushNotificationConfig({
      ...pushConfig(`${receiver.url}/push/2`, "tok-2", { scheme: "Basic", credentials: "dXNlcjpwdw==" }),
      id: "cfg-2",
      taskId: task.id,
    });
    expect(created).toMatchObject({ id: "cfg-2", taskId: task.id, url: `${receiver.url}/push/2` });
    await until("the push of the finished task", () => pushedTo("/push/2").length === 1);
    const [p] = pushedTo("/push/2");
    expect(p?.headers.authorization).toBe("Basic dXNlcjpwdw==");
    expect(p?.json.task.status.state).toBe("TASK_STATE_COMPLETED");

    expect(await c.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-2" })).toMatchObject(
      {
        id: "cfg-2",
        url: `${receiver.url}/push/2`,
      },
    );
    const listed = await c.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 10,
      pageToken: "",
    });
    expect(listed.configs.map((x) => x.id)).toEqual(["cfg-2"]);
    await c.deleteTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-2" });
    expect(
      (await c.listTaskPushNotificationConfig({ tenant: "", taskId: task.id, pageSize: 10, pageToken: "" }))
        .configs,
    ).toEqual([]);
    await expect(
      c.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-2" }),
    ).rejects.toThrow();

    // Another tenant's caller finds no such task, and nothing is subscribed.
    const before = await subscriptionCount();
    const theirs = await a2aClient(intruder.key, served.url);
    await expect(
      theirs.createTaskPushNotificationConfig({ ...pushConfig(`${receiver.url}/push/x`), taskId: task.id }),
    ).rejects.toThrow(/not found/i);
    expect(await subscriptionCount()).toBe(before);
  });

  it("0.3: tasks/pushNotificationConfig/get with the task's id alone returns its config; without a task id, set and get are invalid params and nothing is subscribed", async () => {
    // tests/optional/capabilities/test_push_notification_config_methods.py::test_get_push_notification_config
    // (0.3: get with TaskIdParams) and ::test_set_push_notification_config; A2A 0.3 §7.6.
    const c = await a2aClient(ada.key, served.url);
    const task = await send(c, userMessage("What is the cost per person?"));
    const rpc03 = async (method: string, params: unknown) =>
      (await (
        await fetch(`${served.url}/a2a`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${ada.key}` },
          body: JSON.stringify({ jsonrpc: "2.0", id: 3, method, params }),
        })
      ).json()) as { result?: unknown; error?: { code: number; message: string } };
    const before = await subscriptionCount();
    for (const params of [
      { pushNotificationConfig: { url: `${receiver.url}/push/03` } },
      { taskId: task.id },
    ])
      expect((await rpc03("tasks/pushNotificationConfig/set", params)).error?.code).toBe(-32602);
    expect((await rpc03("tasks/pushNotificationConfig/get", {})).error?.code).toBe(-32602);
    expect(await subscriptionCount()).toBe(before);
    // No config yet: not found.
    expect((await rpc03("tasks/pushNotificationConfig/get", { id: task.id })).error).toMatchObject({
      code: -32001,
      message: expect.stringMatching(/has no push notification config/),
    });

    const set = await rpc03("tasks/pushNotificationConfig/set", {
      taskId: task.id,
      pushNotificationConfig: { url: `${receiver.url}/push/03`, token: "tok-03" },
    });
    expect(set.result).toMatchObject({
      taskId: task.id,
      pushNotificationConfig: { url: `${receiver.url}/push/03` },
    });
    const id = (set.result as { pushNotificationConfig: { id: string } }).pushNotificationConfig.id;
    const got = await rpc03("tasks/pushNotificationConfig/get", { id: task.id });
    expect(got.result).toEqual({
      taskId: task.id,
      pushNotificationConfig: { id, url: `${receiver.url}/push/03`, token: "tok-03" },
    });
    // With its config id, the same; another id is not found.
    expect(
      (await rpc03("tasks/pushNotificationConfig/get", { id: task.id, pushNotificationConfigId: id })).result,
    ).toEqual(got.result);
    expect(
      (await rpc03("tasks/pushNotificationConfig/get", { id: task.id, pushNotificationConfigId: "other" }))
        .error?.code,
    ).toBe(-32001);
    await until("the push of the finished task", () => pushedTo("/push/03").length === 1);
  });

  it("a config's token and credentials are shown again only to whoever gave them, not to an admin who may read the task", async () => {
    const agent = await a2aClient(partner.key, served.url);
    const task = await send(agent, userMessage("What is the cost per person?"));
    await agent.createTaskPushNotificationConfig({
      ...pushConfig(`${receiver.url}/push/owner`, "tok-owner", {
        scheme: "Basic",
        credentials: "cGFydG5lcjpwdw==",
      }),
      id: "cfg-owner",
      taskId: task.id,
    });
    const mine = await agent.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-owner" });
    expect(mine).toMatchObject({ token: "tok-owner", authentication: { credentials: "cGFydG5lcjpwdw==" } });

    const admin = await a2aClient(root.key, served.url);
    const seen = await admin.getTaskPushNotificationConfig({ tenant: "", taskId: task.id, id: "cfg-owner" });
    expect(seen).toMatchObject({ id: "cfg-owner", url: `${receiver.url}/push/owner`, token: "" });
    expect(seen.authentication).toMatchObject({ scheme: "Basic", credentials: "" });
    const listed = await admin.listTaskPushNotificationConfig({
      tenant: "",
      taskId: task.id,
      pageSize: 10,
      pageToken: "",
    });
    expect(listed.configs.map((c) => [c.token, c.authentication?.credentials])).toEqual([["", ""]]);
    // What is sent is unchanged: the receiver still gets the credentials it was given.
    await until("the push of the finished task", () => pushedTo("/push/owner").length >= 1);
    expect(pushedTo("/push/owner")[0]?.headers.authorization).toBe("Basic cGFydG5lcjpwdw==");
  });

  it("refuses a push URL at a private or metadata address, or plain http, before anything is written", async () => {
    const c = await a2aClient(ada.key, served.url);
    const task = await send(c, userMessage("What is the cost per person?"));
    const conversations = async () => (await h.rt.resources.childUrns("cld:common.Tenant.acme")).length;
    const [subs, convs] = [await subscriptionCount(), await conversations()];
    for (const url of [
      "https://10.0.0.1/hook",
      "https://169.254.169.254/latest/meta-data/",
      "http://example.com/hook",
      "https://user:pw@example.com/hook",
    ]) {
      await expect(
        c.createTaskPushNotificationConfig({ ...pushConfig(url, "t"), taskId: task.id }),
        url,
      ).rejects.toThrow(/refused/);
      await expect(sendWithPush(c, "Again?", pushConfig(url, "t")), url).rejects.toThrow(/refused/);
    }
    expect(await subscriptionCount()).toBe(subs);
    expect(await conversations()).toBe(convs);
  });

  it("refuses a push config that could never be sent (too long, or what no HTTP header may carry) before anything is written", async () => {
    const c = await a2aClient(ada.key, served.url);
    const task = await send(c, userMessage("What is the cost per person?"));
    const conversations = async () => (await h.rt.resources.childUrns("cld:common.Tenant.acme")).length;
    const [subs, convs] = [await subscriptionCount(), await conversations()];
    const url = `${receiver.url}/push/bounds`;
    const refused: [string, ReturnType<typeof pushConfig> & { id?: string }, RegExp][] = [
      ["a long url", pushConfig(`${url}?${"a".repeat(3000)}`, "t"), /url is at most 2048/],
      ["a long token", pushConfig(url, "t".repeat(5000)), /token is at most 4096/],
      ["a token with a line break", pushConfig(url, "t\r\nX-Injected: 1"), /token/],
      [
        "long credentials",
        pushConfig(url, "t", { scheme: "Bearer", credentials: "c".repeat(5000) }),
        /credentials are at most 4096/,
      ],
      [
        "a scheme that is not one word",
        pushConfig(url, "t", { scheme: "Bearer x\n", credentials: "c" }),
        /scheme/,
      ],
      ["a long id", { ...pushConfig(url, "t"), id: "i".repeat(300) }, /id is at most 200/],
    ];
    for (const [what, config, why] of refused) {
      await expect(c.createTaskPushNotificationConfig({ ...config, taskId: task.id }), what).rejects.toThrow(
        why,
      );
      await expect(sendWithPush(c, "Again?", config), what).rejects.toThrow(why);
    }
    expect(await subscriptionCount()).toBe(subs);
    expect(await conversations()).toBe(convs);
  });

  it("refuses a loopback receiver unless the operator turned on the development switch", async () => {
    // A second endpoint on the same engine whose operator left the switch off (the default).
    const strict = new NotifyService({ deps: h.engine.deps, urls: notifyUrls() });
    const app = await serveA2a(h.engine, { notify: strict });
    try {
      const c = await a2aClient(ada.key, app.url);
      const task = await send(c, userMessage("What is the cost per person?"));
      const count = receiver.got.length;
      await expect(
        c.createTaskPushNotificationConfig({ ...pushConfig(`${receiver.url}/push/3`, "t"), taskId: task.id }),
      ).rejects.toThrow(/ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP/);
      expect(receiver.got.length).toBe(count);
    } finally {
      await app.close();
    }
  });

  it("a receiver that redirects is a failed attempt: the redirect is not followed, the target gets nothing", async () => {
    const target = await startReceiver();
    try {
      receiver.answer = (r) => (r.path === "/push/4" ? { redirect: `${target.url}/stolen` } : 200);
      const c = await a2aClient(ada.key, served.url);
      const ack = await sendWithPush(
        c,
        "What is the cost per person?",
        pushConfig(`${receiver.url}/push/4`, "tok-4"),
      );
      await until("a redirected attempt", () => pushedTo("/push/4").length >= 1);
      await h.idle();
      await notify.worker.runNow();
      const records = await h.rt.state.byParent<{ lastError?: string; lastStatus?: number }>(
        `notify-deliveries#${rootOf(ack)}`,
      );
      expect(records.items.length).toBeGreaterThan(0);
      for (const r of records.items) {
        const current = await h.rt.state.get<{ lastError?: string }>(r.key);
        expect(current?.status).toBe("pending");
        expect(current?.data.lastError).toMatch(/redirect/);
      }
      expect(target.got).toEqual([]);
    } finally {
      receiver.answer = () => 200;
      await target.close();
    }
  });
});
