import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signSlackBody } from "../../shared/channels/chat/slack/verify.ts";
import {
  buttonClick,
  buttonsOf,
  eventCallback,
  interactivityForm,
  startFakeSlack,
  textOf,
} from "../peers/fake-slack.ts";
import { startFakeTeams } from "../peers/fake-teams.ts";
import { addKey, arborCli, arborEnv, killAll, killHard, startServe } from "../support/arbor-process.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor serve` mounts Slack and Teams from the chat settings file (<dataDir>/chat.json, or
 * ARBOR_CHAT_SETTINGS_FILE): a file its group or others may read stops it at start, saying the
 * chmod to run; without the file the chat routes answer 404 (not configured here) and the file
 * written later is taken without a restart; a file that turns bad while it runs answers 503,
 * nothing read; the Slack routes verify each request against the file's signing secret.
 */
const SIGNING_SECRET = "chat-serve-signing-secret-1";
const BOT_TOKEN = "xoxb-serve-token-1";
const settings = (apiUrl?: string) =>
  JSON.stringify({
    slack: {
      signingSecret: SIGNING_SECRET,
      ...(apiUrl ? { apiUrl } : {}),
      workspaces: { T0SERVE: { tenant: "acme", botToken: BOT_TOKEN, users: { U_ADA: "user_ada" } } },
    },
  });

let dir: string;
let dataDir: string;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-chat-serve-"));
  dataDir = join(dir, "data");
  env = arborEnv(dataDir);
  await addKey(env, "user_ada");
}, 60_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const serve = (extra: Record<string, string> = {}) =>
  startServe({ ...env, ...extra }, ["--example", "offsite"]);

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

const signed = (body: string) => signSlackBody(SIGNING_SECRET, body, Math.floor(Date.now() / 1000));

describe("arbor serve and the chat settings file", () => {
  it("does not start with a settings file others may read, and says the chmod to run", async () => {
    const file = join(dir, "shared-chat.json");
    await writeFile(file, settings());
    await chmod(file, 0o644);
    const run = await arborCli(["serve", "--port", "0", "--example", "offsite"], {
      ...env,
      ARBOR_CHAT_SETTINGS_FILE: file,
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`chmod 600 ${file}`);
    expect(run.stderr).not.toContain(SIGNING_SECRET);
  }, 120_000);

  it("without the file: 404 on the chat routes; the file written later is taken at once, and verified against", async () => {
    const s = await serve();
    const challenge = JSON.stringify({ type: "url_verification", challenge: "c-123", token: "t" });
    const before = await post(`${s.url}/slack/events`, challenge, signed(challenge));
    expect(before.status).toBe(404);
    expect(((await before.json()) as { error: { message: string } }).error.message).toMatch(
      /Slack is not configured here/,
    );
    const teams = await post(`${s.url}/teams/messages`, "{}");
    expect(teams.status).toBe(404);

    const file = join(dataDir, "chat.json");
    await writeFile(file, settings(), { mode: 0o600 });
    await chmod(file, 0o600);
    const after = await post(`${s.url}/slack/events`, challenge, signed(challenge));
    expect(after.status).toBe(200);
    expect(await after.text()).toContain("c-123");
    const forged = await post(
      `${s.url}/slack/events`,
      challenge,
      signSlackBody("another-secret-xyz", challenge, Math.floor(Date.now() / 1000)),
    );
    expect(forged.status).toBe(401);
    // Teams is not in the file: still not configured here.
    expect((await post(`${s.url}/teams/messages`, "{}")).status).toBe(404);

    // Made readable by others while serving: refused (503, try again), nothing read.
    await chmod(file, 0o644);
    const refused = await post(`${s.url}/slack/events`, challenge, signed(challenge));
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBeTruthy();
    expect(await refused.text()).not.toContain(SIGNING_SECRET);
    await chmod(file, 0o600);
    expect((await post(`${s.url}/slack/events`, challenge, signed(challenge))).status).toBe(200);

    // The HTTP API is unchanged beside them.
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    await s.stop();
    expect(await s.exited).toBe(0);
    await rm(file);
  }, 180_000);

  it("a mention is acked, and the thread gets the progress and the answer through the local notify path", async () => {
    const slack = await startFakeSlack({ tokens: { [BOT_TOKEN]: "T0SERVE" } });
    const file = join(dataDir, "chat.json");
    await writeFile(file, settings(slack.apiUrl), { mode: 0o600 });
    await chmod(file, 0o600);
    try {
      const s = await serve();
      const mention = eventCallback({
        team: "T0SERVE",
        eventId: "Ev_SERVE_1",
        event: {
          type: "app_mention",
          user: "U_ADA",
          channel: "C_SERVE",
          ts: "1780000000.000100",
          text: "<@UBOT> plan the offsite",
        },
      });
      expect((await post(`${s.url}/slack/events`, mention, signed(mention))).status).toBe(200);
      // The offsite example asks before it sends its email: the question comes to the thread.
      const asked = await eventually(
        async () => slack.thread("C_SERVE", "1780000000.000100"),
        (t) => t.some((m) => buttonsOf(m).length > 0),
        60_000,
      );
      const question = asked.find((m) => buttonsOf(m).length > 0);
      expect(textOf(asked[0] as never)).toMatch(/Plan the offsite/);
      const allow = question ? buttonsOf(question).find((b) => b.text === "Allow") : undefined;
      expect(allow).toBeDefined();
      const form = interactivityForm(
        buttonClick({
          team: "T0SERVE",
          user: "U_ADA",
          channel: "C_SERVE",
          message: question as never,
          button: allow as never,
        }),
      );
      const click = await fetch(`${s.url}/slack/interactivity`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...signed(form) },
        body: form,
      });
      expect(click.status).toBe(200);
      const thread = await eventually(
        async () => slack.thread("C_SERVE", "1780000000.000100"),
        (t) => t.length >= 3 && /Done/.test(textOf(t[0] as never)),
        60_000,
      );
      // The progress message (now done), the question (now answered: who, what), the answer.
      expect(textOf(thread[0] as never)).toMatch(/Done/);
      expect(textOf(slack.message("C_SERVE", question?.ts ?? "") as never)).toMatch(
        /`user_ada` answered: \*Allow\*/,
      );
      expect(thread).toHaveLength(3);
      for (const c of slack.calls()) expect(c.token).toBe(BOT_TOKEN);
      await s.stop();
    } finally {
      await slack.close();
      await rm(file, { force: true });
    }
  }, 240_000);

  it("a Teams message is acked, and the conversation gets the progress, the question card and, once allowed, the answer", async () => {
    const teams = await startFakeTeams();
    const ada = "0a0a0a0a-0000-0000-0000-00000000ada0";
    const file = join(dataDir, "chat.json");
    const chat = {
      teams: teams.settings({
        tenants: {
          "aad-serve": { tenant: "acme", users: { [ada]: "user_ada" }, admins: [], defaultRoles: [] },
        },
      }),
    };
    await writeFile(file, JSON.stringify(chat), { mode: 0o600 });
    await chmod(file, 0o600);
    // The fake Teams is on loopback: the development switches for the signing keys (the outbound
    // guard) and for the Bot Connector (the notify path's loopback switch).
    const s = await serve({
      ARBOR_OUTBOUND_ALLOW: "127.0.0.1",
      ARBOR_OUTBOUND_PORTS: "1024-65535",
      ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true",
    });
    try {
      const activity = (extra: Record<string, unknown>) => ({
        channelId: "msteams",
        serviceUrl: teams.serviceUrl,
        from: { id: `29:${ada}`, aadObjectId: ada, name: "Ada" },
        recipient: { id: "28:bot-id", name: "Arbor" },
        conversation: { id: "a:serve-ada", tenantId: "aad-serve", conversationType: "personal" },
        channelData: { tenant: { id: "aad-serve" } },
        ...extra,
      });
      const send = async (a: Record<string, unknown>) =>
        post(`${s.url}/teams/messages`, JSON.stringify(a), {
          authorization: `Bearer ${await teams.activityToken(teams.serviceUrl)}`,
        });
      const ack = await send(
        activity({ type: "message", id: "msg-serve-1", text: "<at>Arbor</at> plan the offsite" }),
      );
      expect(ack.status).toBe(202);
      const posted = () => teams.activities.filter((a) => a.conversationId === "a:serve-ada");
      const asked = await eventually(
        async () => posted(),
        (all) => all.some((a) => JSON.stringify(a.body).includes("Action.Execute")),
        60_000,
      );
      const card = JSON.stringify(asked.find((a) => JSON.stringify(a.body).includes("Action.Execute"))?.body);
      const interaction = /"interaction":"([^"]+)"/.exec(card)?.[1];
      expect(interaction).toBeDefined();
      const invoke = await send(
        activity({
          type: "invoke",
          name: "adaptiveCard/action",
          id: "inv-serve-1",
          value: {
            action: {
              type: "Action.Execute",
              verb: "arbor.answer",
              data: { interaction, option: "approve" },
            },
            trigger: "manual",
          },
        }),
      );
      expect(invoke.status).toBe(200);
      const done = await eventually(
        async () => posted(),
        (all) => all.some((a) => a.method === "PUT" && JSON.stringify(a.body).includes(": completed")),
        60_000,
      );
      expect(done.some((a) => a.method === "PUT" && JSON.stringify(a.body).includes(": completed"))).toBe(
        true,
      );
      // Posted: the progress card, the question card, the answer (once).
      await eventually(
        async () => posted().filter((a) => a.method === "POST"),
        (p) => p.length >= 3,
        30_000,
      );
      expect(posted().filter((a) => a.method === "POST")).toHaveLength(3);
      // Every call to the Bot Connector carried the bot's own token, from the token endpoint.
      for (const a of done) expect(a.authorization).toMatch(/^Bearer \S+/);
      await s.stop();
    } finally {
      await killHard(s).catch(() => undefined);
      await teams.close();
      await rm(file, { force: true });
    }
  }, 240_000);
});
