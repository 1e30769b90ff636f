import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type APIGatewayProxyEventV2, type ApiHandler, createApiHandler } from "../../functions/api.ts";
import { createStepHandler, type StepHandler } from "../../functions/engine-step.ts";
import { createNotifyHandler, type NotifyHandler } from "../../functions/notify.ts";
import { createToolHandler, type ToolHandler } from "../../functions/tool.ts";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { signSlackBody } from "../../shared/channels/chat/slack/verify.ts";
import { compilePattern } from "../../shared/kernel/event-pattern/index.ts";
import type { ChatSettings } from "../../shared/notify/chat/types.ts";
import { NOTIFY_WAKE_PATTERN } from "../../shared/notify/wakeups.ts";
import type { BusEnvelope } from "../../shared/ports/event-bus.ts";
import { type AwsRuntime, createAwsRuntime } from "../../shared/runtime/aws/aws.ts";
import type { AwsConfig } from "../../shared/runtime/config.ts";
import { apiEvent } from "../peers/api-gateway-events.ts";
import type { EventBridgePeer } from "../peers/eventbridge-peer.ts";
import {
  buttonClick,
  buttonsOf,
  eventCallback,
  type FakeMessage,
  type FakeSlack,
  interactivityForm,
  startFakeSlack,
  textOf,
} from "../peers/fake-slack.ts";
import { type FakeTeams, startFakeTeams } from "../peers/fake-teams.ts";
import { LambdaInvokePeer } from "../peers/lambda-invoke.ts";
import { planningModel } from "../peers/planning-model.ts";
import { SecretsManagerPeer } from "../peers/secrets-manager-peer.ts";
import { SqsPeer } from "../peers/sqs-peer.ts";
import { pollQueue } from "../peers/sqs-poll.ts";
import {
  type AwsWorld,
  apiGuard,
  EventBridgePlayer,
  guarded,
  notifyGuard,
  startAwsWorld,
} from "./aws-world.ts";

/**
 * Slack and Teams through the AWS handlers, offline: the API function (API Gateway v2 events) takes
 * a signed Slack mention or a Teams activity with its token, records the request, subscribes the
 * thread and answers at once; the engine step functions run on the events EventBridge feeds them;
 * the notify function consumes the wake and delivery queues and posts the thread (the progress
 * message, the question, the answer) to the fake Slack API with the real WebClient, and to the
 * fake Bot Connector through the outbound guard. The approval is answered by a click (Slack's
 * block_actions, Teams' Action.Execute invoke) through the API function, and the work resumes.
 *
 * The chat settings are a Secrets Manager secret (the Secrets Manager peer, the real client),
 * as the stack wires them (ARBOR_CHAT_SECRET_ARN). What AWS does and the local peers do not is
 * played here: every wake-up reaches the wake queue twice, newest first (the rule's at-least-once
 * delivery, out of order), and the step events are delivered by the EventBridge player.
 */
const BUS = "arbor-chat-aws";
const TOOL_FUNCTION = "arbor-chat-tools";
const TENANT = "acme";
const SIGNING_SECRET = "chat-aws-signing-secret-1";
const BOT_TOKEN = "xoxb-chat-aws-token-1";
const SLACK_TEAM = "T0AWS";
const AAD_TENANT = "aad-tenant-aws";
const ADA_AAD = "0a0a0a0a-0000-0000-0000-00000000ada0";
const admin = newApiKey({ id: "user_root", kind: "human", tenant: TENANT, roles: ["admin"] });

const COORDINATOR = {
  purpose: "Coordinate inviting the team and report who was invited",
  evaluation: "The answer says the team was invited",
};
const MAILER = { purpose: "Invite the team by email: invitations and announcements" };
const TEAM = {
  assistants: [
    { name: "Coordinator", id: "coordinator", ...COORDINATOR },
    { name: "Mailer", id: "mailer", ...MAILER, tools: ["send_email"] },
  ],
};
const ANSWER = "The team is invited.";
const EMAIL = { to: "team@example.com", subject: "Offsite", body: "Join us" };

/** One plan with one part (the Mailer's), whose leaf sends one email (once allowed), then answers. */
const model = planningModel({
  plan: { name: "Invite the team", ...COORDINATOR, subtasks: [{ name: "Invite", ...MAILER }] },
  evaluation: { reason: "invited", answer: ANSWER },
  leaf: ({ toolResult }) =>
    toolResult !== undefined
      ? { content: "invited" }
      : { toolCalls: [{ name: "send_email", arguments: EMAIL }] },
});

describe("Slack and Teams on AWS: the API function, the engine steps and the notify function", () => {
  let world: AwsWorld;
  let peer: EventBridgePeer;
  let sqsPeer: SqsPeer;
  let sqs: SQSClient;
  let secrets: SecretsManagerPeer;
  let slack: FakeSlack;
  let teams: FakeTeams;
  let config: AwsConfig;
  let rt: AwsRuntime;
  let api: ApiHandler;
  let steps: StepHandler[];
  let notify: NotifyHandler;
  let tools: ToolHandler;
  let toolPeer: LambdaInvokePeer;
  let wakeUrl: string;
  let deliveryUrl: string;
  const sentToWake = new Set<string>();
  const wakeMatches = compilePattern(NOTIFY_WAKE_PATTERN);
  const { drain } = new EventBridgePlayer(
    () => world,
    BUS,
    () => steps,
  );

  const call = async (event: APIGatewayProxyEventV2) => {
    const res = await api(event, { awsRequestId: randomUUID() });
    const body = res.isBase64Encoded ? Buffer.from(res.body, "base64").toString("utf8") : res.body;
    return { status: res.statusCode, body };
  };

  /**
   * A POST as API Gateway hands it over, with this raw body (a signature is over the bytes); a form
   * body base64-encoded, as the HTTP API passes a body that is not JSON or text.
   */
  const rawPost = (path: string, body: string, headers: Record<string, string>) => {
    const event = apiEvent("POST", path);
    const base64 = headers["content-type"] === "application/x-www-form-urlencoded";
    return {
      ...event,
      routeKey: `POST /${path.split("/")[1]}/{proxy+}`,
      pathParameters: { proxy: path.split("/").slice(2).join("/") },
      headers: { ...event.headers, "content-length": String(Buffer.byteLength(body)), ...headers },
      body: base64 ? Buffer.from(body).toString("base64") : body,
      isBase64Encoded: base64,
    } as APIGatewayProxyEventV2;
  };
  const slackPost = (
    path: string,
    body: string,
    headers: Record<string, string> = {},
    secret = SIGNING_SECRET,
  ) =>
    call(
      rawPost(path, body, {
        "content-type": body.startsWith("{") ? "application/json" : "application/x-www-form-urlencoded",
        ...signSlackBody(secret, body, Math.floor(Date.now() / 1000)),
        ...headers,
      }),
    );
  const teamsPost = async (activity: Record<string, unknown>) =>
    call(
      rawPost("/teams/messages", JSON.stringify(activity), {
        "content-type": "application/json",
        authorization: `Bearer ${await teams.activityToken(String(activity.serviceUrl))}`,
      }),
    );

  /** The wake rule's SQS target, as AWS may deliver it: every wake-up twice, newest first. */
  const forwardWakeups = async (): Promise<number> => {
    const fresh = peer.eventsOn(BUS).filter((e) => !sentToWake.has(e.id) && wakeMatches(e as BusEnvelope));
    for (const e of fresh) sentToWake.add(e.id);
    const sent = [...fresh, ...fresh].reverse();
    for (const e of sent)
      await sqs.send(new SendMessageCommand({ QueueUrl: wakeUrl, MessageBody: JSON.stringify(e) }));
    return sent.length;
  };

  /** Lambda's event source mapping (test/peers/sqs-poll.ts). */
  const poll = (queueUrl: string): Promise<number> => pollQueue(sqs, sqsPeer, queueUrl, notify);

  /** AWS until it is quiet: steps on their events, wake-ups to the wake queue, both queues consumed. */
  const settle = async (): Promise<void> => {
    for (let round = 0; round < 60; round++) {
      const moved =
        (await drain()) + (await forwardWakeups()) + (await poll(wakeUrl)) + (await poll(deliveryUrl));
      if (moved === 0) return;
    }
    throw new Error("AWS did not settle within 60 rounds");
  };

  /** The emails the tool function really sent (its ExecuteTool calls of send_email). */
  const emailsSent = () =>
    toolPeer.invocations.filter((i) => {
      const p = i.payload as { op?: string; tool?: string };
      return p.op === "ExecuteTool" && p.tool === "send_email";
    }).length;

  /** Every item of the state table: what "nothing written" is measured by. */
  const tableItems = async (): Promise<number> => {
    let n = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const out = await world.dynamodb.send(
        new ScanCommand({
          TableName: config.tableName,
          ...(start ? { ExclusiveStartKey: start as never } : {}),
        }),
      );
      n += out.Count ?? 0;
      start = out.LastEvaluatedKey;
    } while (start);
    return n;
  };

  beforeAll(async () => {
    sqsPeer = await SqsPeer.start();
    sqs = sqsPeer.client();
    const dlqUrl = sqsPeer.createQueue("arbor-dlq");
    wakeUrl = sqsPeer.createQueue("arbor-notify-wake");
    deliveryUrl = sqsPeer.createQueue("arbor-notify-deliveries");
    sqsPeer.redrive(wakeUrl, dlqUrl, 5);
    sqsPeer.redrive(deliveryUrl, dlqUrl, 5);
    secrets = await SecretsManagerPeer.start("us-east-1");
    slack = await startFakeSlack({ tokens: { [BOT_TOKEN]: SLACK_TEAM } });
    teams = await startFakeTeams();
    const settings: ChatSettings = {
      slack: {
        signingSecret: SIGNING_SECRET,
        apiUrl: slack.apiUrl,
        workspaces: {
          [SLACK_TEAM]: {
            tenant: TENANT,
            botToken: BOT_TOKEN,
            users: { U_ADA: "user_ada" },
            admins: [],
            defaultRoles: [],
          },
        },
      },
      teams: teams.settings({
        tenants: {
          [AAD_TENANT]: { tenant: TENANT, users: { [ADA_AAD]: "user_ada" }, admins: [], defaultRoles: [] },
        },
      }),
    };
    const secretArn = secrets.create("arbor/test/chat", JSON.stringify(settings));
    world = await startAwsWorld({
      name: "arbor-chat",
      bus: BUS,
      model,
      env: {
        ARBOR_TENANT: TENANT,
        ARBOR_STAGE: "chat-test",
        ARBOR_PUBLIC_URL: "https://abc123.execute-api.us-east-1.amazonaws.com",
        ARBOR_NOTIFY_QUEUE_URL: deliveryUrl,
        ARBOR_SQS_ENDPOINT: sqsPeer.endpoint,
        ARBOR_CHAT_SECRET_ARN: secretArn,
        ARBOR_SECRETSMANAGER_ENDPOINT: secrets.endpoint,
        // The fake Slack, Teams and Bot Connector are on loopback: the development switches
        // (the notify path's, refused on Lambda; the outbound guard's, for the Teams signing keys).
        ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true",
        ARBOR_OUTBOUND_ALLOW: "127.0.0.1",
        ARBOR_OUTBOUND_PORTS: "1024-65535",
        ARBOR_TOOL_FUNCTION: TOOL_FUNCTION,
      },
    });
    ({ peer, config } = world);
    const clients = world.clients;
    const secretsManager = secrets.client();
    // The tool function runs send_email (the steps call it, the API function lists its tools).
    const { embeddings, s3vectors, s3 } = world.engineClients;
    tools = createToolHandler({
      config: () => config,
      clients,
      tools: { clients: { embeddings, s3vectors, s3 } },
    });
    toolPeer = await LambdaInvokePeer.start({ [TOOL_FUNCTION]: (event) => tools(event) });
    const engineClients = { ...world.engineClients, lambda: toolPeer.client() };
    api = guarded(
      apiGuard(world),
      createApiHandler({
        config: () => config,
        clients,
        sqs,
        secretsManager,
        engine: { clients: engineClients },
      }),
    );
    const stepDeps = {
      config: () => config,
      clients,
      engine: { clients: engineClients, settings: { turnStepMs: 0 } },
    };
    steps = [createStepHandler(stepDeps), createStepHandler(stepDeps)];
    notify = guarded(
      notifyGuard(world, [wakeUrl, deliveryUrl], [sqs, secretsManager]),
      createNotifyHandler({
        config: () => config,
        clients,
        sqs,
        secretsManager,
        notify: { random: () => 0.5 },
      }),
    );
    rt = createAwsRuntime(config, clients);
    await new StateKeyStore(rt.state).add(admin.entry);
    const team = apiEvent("PUT", "/v1/admin/team", { key: admin.key, body: TEAM });
    const put = await call(team);
    expect(put.status, put.body).toBe(200);
  }, 120_000);

  afterAll(async () => {
    for (const s of steps ?? []) await s.close();
    await notify?.close();
    await api?.close();
    await tools?.close();
    await toolPeer?.close();
    await rt?.close();
    sqs?.destroy();
    await sqsPeer?.close();
    await secrets?.close();
    await slack?.close();
    await teams?.close();
    await world?.close();
  });

  describe("Slack", () => {
    const mention = (eventId: string, text: string) =>
      eventCallback({
        team: SLACK_TEAM,
        eventId,
        event: { type: "app_mention", user: "U_ADA", channel: "C_AWS", ts: "1780000000.000100", text },
      });

    it("a bad signature: 401, nothing written, nothing queued", async () => {
      const before = await tableItems();
      const published = peer.eventsOn(BUS).length; // the team's registration announced its assistants
      const res = await slackPost(
        "/slack/events",
        mention("Ev_BAD", "<@UBOT> invite the team"),
        {},
        "not-the-secret-x",
      );
      expect(res.status).toBe(401);
      expect(await tableItems()).toBe(before);
      expect(peer.eventsOn(BUS)).toHaveLength(published);
    });

    it("a mention: acked at once; the thread shows progress, the question, and, once allowed by a click, the answer", async () => {
      const modelCalls = world.bedrock?.calls.length ?? 0;
      const ack = await slackPost("/slack/events", mention("Ev_AWS_1", "<@UBOT> invite the team"));
      expect(ack.status).toBe(200);
      // Nothing else was awaited: no step has run (the model was not called) when the ack came.
      expect(world.bedrock?.calls.length ?? 0).toBe(modelCalls);

      // The tenant's first request registers its tools beside it (not in its path): once that has
      // landed, Slack retries the event (X-Slack-Retry-Num): the same request, nothing new.
      for (let i = 0; i < 200 && !(await rt.state.get(`toolregistry#${TENANT}`)); i++) await sleep(25);
      expect(await rt.state.get(`toolregistry#${TENANT}`)).toBeDefined();
      const items = await tableItems();
      const retried = await slackPost("/slack/events", mention("Ev_AWS_1", "<@UBOT> invite the team"), {
        "x-slack-retry-num": "1",
        "x-slack-retry-reason": "http_timeout",
      });
      expect(retried.status).toBe(200);
      expect(await tableItems()).toBe(items);

      await settle();
      const thread = slack.thread("C_AWS", "1780000000.000100").filter((m) => m.ts !== "1780000000.000100");
      const progress = thread[0] as FakeMessage;
      expect(progress).toBeDefined();
      expect(textOf(progress)).toContain("Invite the team");
      const question = thread.find((m) => buttonsOf(m).length > 0);
      expect(question).toBeDefined();
      expect(textOf(question as FakeMessage)).toContain("send_email");
      // Nothing is answered yet: no answer in the thread, no email sent.
      expect(thread.some((m) => m.text.includes(ANSWER))).toBe(false);
      expect(emailsSent()).toBe(0);

      const allow = buttonsOf(question as FakeMessage).find((b) => /allow|approve|run/i.test(b.text));
      expect(allow).toBeDefined();
      const click = await slackPost(
        "/slack/interactivity",
        interactivityForm(
          buttonClick({
            team: SLACK_TEAM,
            user: "U_ADA",
            channel: "C_AWS",
            message: question as FakeMessage,
            button: allow as { action_id: string; value: string },
          }),
        ),
      );
      expect(click.status).toBe(200);
      await settle();

      expect(emailsSent()).toBe(1);
      const after = slack.thread("C_AWS", "1780000000.000100");
      // The progress message, kept up to date: now done.
      expect(textOf(slack.message("C_AWS", progress.ts) as FakeMessage)).toMatch(/Done/);
      expect(after.some((m) => m.text.includes(ANSWER) || textOf(m).includes(ANSWER))).toBe(true);
      const answeredQuestion = slack.message("C_AWS", (question as FakeMessage).ts);
      expect(textOf(answeredQuestion as FakeMessage)).toMatch(/`user_ada` answered: \*Allow\*/);
      expect(buttonsOf(answeredQuestion as FakeMessage)).toEqual([]);
      // One progress message, kept up to date; one answer, though every wake-up came twice.
      const answers = after.filter((m) => m.text.includes(ANSWER) || textOf(m).includes(ANSWER));
      expect(answers).toHaveLength(1);
      expect(slack.calls("chat.update").length).toBeGreaterThan(0);
      for (const c of slack.calls()) expect(c.token).toBe(BOT_TOKEN);
    });
  });

  describe("Teams", () => {
    const base = () => ({
      channelId: "msteams",
      serviceUrl: teams.serviceUrl,
      from: { id: `29:${ADA_AAD}`, aadObjectId: ADA_AAD, name: "Ada" },
      recipient: { id: "28:bot-id", name: "Arbor" },
      conversation: { id: "a:aws-chat-ada", tenantId: AAD_TENANT, conversationType: "personal" },
      channelData: { tenant: { id: AAD_TENANT } },
    });

    it("an activity without a valid token: 401, nothing written", async () => {
      const before = await tableItems();
      const activity = { type: "message", id: "msg-bad", text: "invite the team", ...base() };
      const res = await call(
        rawPost("/teams/messages", JSON.stringify(activity), {
          "content-type": "application/json",
          authorization: "Bearer not.a.token",
        }),
      );
      expect(res.status).toBe(401);
      expect(await tableItems()).toBe(before);
    });

    it("a message: acked at once; the conversation gets progress, the question card, and, once allowed, the answer", async () => {
      const ack = await teamsPost({
        type: "message",
        id: "msg-aws-1",
        text: "<at>Arbor</at> invite the team",
        ...base(),
      });
      expect(ack.status).toBe(202);
      await settle();
      const posted = teams.activities.filter((a) => a.conversationId === "a:aws-chat-ada");
      expect(posted.length).toBeGreaterThanOrEqual(2);
      const cardOf = (a: (typeof posted)[number]) => JSON.stringify(a.body);
      const questionPost = posted.find((a) => cardOf(a).includes("Action.Execute"));
      expect(questionPost).toBeDefined();
      const interaction = /"interaction":"([^"]+)"/.exec(
        cardOf(questionPost as (typeof posted)[number]),
      )?.[1];
      expect(interaction).toBeDefined();

      const invoke = await teamsPost({
        type: "invoke",
        name: "adaptiveCard/action",
        id: "inv-aws-1",
        value: {
          action: { type: "Action.Execute", verb: "arbor.answer", data: { interaction, option: "approve" } },
          trigger: "manual",
        },
        ...base(),
      });
      expect(invoke.status).toBe(200);
      // Named as Teams names her; her actor id stays user_ada (the answer is hers to give).
      expect(invoke.body).toContain("Answered by **Ada**");
      await settle();
      expect(emailsSent()).toBe(2); // Slack's, then this one
      const all = teams.activities.filter((a) => a.conversationId === "a:aws-chat-ada");
      const [progress] = all;
      expect(progress?.method).toBe("POST");
      // The progress card, replaced once the request is done; the question's, to say who answered.
      const replaced = all.filter((a) => a.method === "PUT").map((a) => JSON.stringify(a.body));
      expect(replaced.some((b) => b.includes("Invite the team: completed"))).toBe(true);
      expect(replaced.some((b) => b.includes("Allow send_email?") && b.includes("Answered by **Ada**"))).toBe(
        true,
      );
      expect(all.some((a) => JSON.stringify(a.body).includes(ANSWER))).toBe(true);
      expect(all.filter((a) => a.method === "POST" && JSON.stringify(a.body).includes(ANSWER))).toHaveLength(
        1,
      );
    });
  });
});
