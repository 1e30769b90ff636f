import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signSlackBody } from "../../shared/channels/chat/slack/verify.ts";
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
import { addKey, arborEnv, killAll, killHard, type Served, startServe } from "../support/arbor-process.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor serve` with Slack, killed with SIGKILL at the worst moments and started again on the same
 * data folder: right after a mention was acked, right after the fake Slack took the first post of
 * a thread (mid-sync), and right after an approval click was acked. Nothing acked is lost, each
 * thread completes, each message is posted once (the progress message at most twice: the one
 * documented window, the platform took the post and the process died before its ts was recorded),
 * the answer once, and a denied risky call never reports its effect.
 */
const SECRET = "crash-serve-signing-secret";
const TOKEN = "xoxb-crash-serve-1";
const TEAM = "T0CRASH";
const CHANNEL = "C_CRASH";
const ONE = "1780000000.000100";
const TWO = "1780000000.000900";

let dir: string;
let env: NodeJS.ProcessEnv;
let slack: FakeSlack;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-attack-serve-"));
  const dataDir = join(dir, "data");
  env = arborEnv(dataDir);
  await addKey(env, "user_ada");
  slack = await startFakeSlack({ tokens: { [TOKEN]: TEAM } });
  const file = join(dataDir, "chat.json");
  await writeFile(
    file,
    JSON.stringify({
      slack: {
        signingSecret: SECRET,
        apiUrl: slack.apiUrl,
        workspaces: { [TEAM]: { tenant: "acme", botToken: TOKEN, users: { U_ADA: "user_ada" } } },
      },
    }),
    { mode: 0o600 },
  );
  await chmod(file, 0o600);
}, 60_000);
afterAll(async () => {
  await killAll();
  await slack?.close();
  await rm(dir, { recursive: true, force: true });
});

const serve = () => startServe(env, ["--example", "offsite"]);

const signed = (body: string) => signSlackBody(SECRET, body, Math.floor(Date.now() / 1000));
const mention = (eventId: string, ts: string) =>
  eventCallback({
    team: TEAM,
    eventId,
    event: { type: "app_mention", user: "U_ADA", channel: CHANNEL, ts, text: "<@UBOT> plan the offsite" },
  });
const postEvent = (s: Served, body: string) =>
  fetch(`${s.url}/slack/events`, {
    method: "POST",
    headers: { "content-type": "application/json", ...signed(body) },
    body,
  });
const click = (s: Served, question: FakeMessage, text: string) => {
  const button = buttonsOf(question).find((b) => b.text === text);
  if (!button) throw new Error(`no button ${text}`);
  const form = interactivityForm(
    buttonClick({ team: TEAM, user: "U_ADA", channel: CHANNEL, message: question, button }),
  );
  return fetch(`${s.url}/slack/interactivity`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...signed(form) },
    body: form,
  });
};

const thread = (ts: string) => slack.thread(CHANNEL, ts);
const questionIn = (ts: string) =>
  thread(ts).find((m) => buttonsOf(m).length > 0 || /answered/.test(textOf(m)));
/** The progress messages: a first section of the request's title, then its state (blocks.ts). */
const PROGRESS = /^\*[^*\n]+\*\n:[a-z_]+: (Working|Waiting for an answer|Done|Failed|Canceled)/;
const progressIn = (ts: string) => thread(ts).filter((m) => PROGRESS.test(textOf(m)));
/** A progress message that shows how its request ended. */
const ENDED = /^\*[^*\n]+\*\n:[a-z_]+: (Done|Failed|Canceled)/;
/**
 * The progress message the thread record keeps updating: the last one posted. In the window the
 * first post is orphaned (Slack took it, its ts was never recorded) and stays as it was forever.
 */
const liveProgressIn = (ts: string) => progressIn(ts).at(-1);
const isQuestion = (m: FakeMessage) => buttonsOf(m).length > 0 || /answered/.test(textOf(m));
/** What is neither a progress message nor a question: the answer (or how the request failed). */
const answersIn = (ts: string) => {
  const progress = new Set(progressIn(ts));
  return thread(ts).filter((m) => !progress.has(m) && !isQuestion(m));
};
const waitForQuestion = (ts: string) =>
  eventually(
    async () => questionIn(ts),
    (q) => q !== undefined && buttonsOf(q).length > 0,
    90_000,
  );

describe("arbor serve with Slack, killed and started again", () => {
  it("SIGKILL after a mention's ack, mid-sync and after a click's ack: nothing lost, nothing twice but the window", async () => {
    // 1. Killed right after the mention was acked: the request and its thread survive.
    let s = await serve();
    expect((await postEvent(s, mention("Ev_CRASH_1", ONE))).status).toBe(200);
    await killHard(s);
    s = await serve();
    const first = await waitForQuestion(ONE);
    expect(first).toBeDefined();

    // 2. Killed mid-sync: right after the fake Slack took the second thread's first post.
    const before = slack.calls("chat.postMessage").length;
    expect((await postEvent(s, mention("Ev_CRASH_2", TWO))).status).toBe(200);
    await eventually(
      async () => slack.calls("chat.postMessage").length,
      (n) => n > before,
      90_000,
    );
    await killHard(s);
    s = await serve();
    const second = await waitForQuestion(TWO);
    expect(second).toBeDefined();

    // 3. Killed right after the approval click was acked (thread one); thread two is denied.
    expect((await click(s, first as FakeMessage, "Allow")).status).toBe(200);
    await killHard(s);
    s = await serve();
    expect((await click(s, second as FakeMessage, "Deny")).status).toBe(200);

    // Done: the progress message shows how the request ended, and the answer (or failure) is posted.
    const done = (ts: string) =>
      eventually(
        async () => thread(ts),
        () => {
          const live = liveProgressIn(ts);
          return live !== undefined && ENDED.test(textOf(live)) && answersIn(ts).length > 0;
        },
        120_000,
      );
    const one = await done(ONE);
    const two = await done(TWO);

    for (const [ts, t, chosen] of [
      [ONE, one, "Allow"],
      [TWO, two, "Deny"],
    ] as const) {
      // The progress message the thread keeps shows how the request ended.
      expect(textOf(liveProgressIn(ts) as FakeMessage), `progress in ${ts}`).toMatch(ENDED);
      // The progress message at most twice (the window), the question once, shown answered once.
      expect(progressIn(ts).length, `progress posts in ${ts}`).toBeGreaterThanOrEqual(1);
      expect(progressIn(ts).length, `progress posts in ${ts}`).toBeLessThanOrEqual(2);
      const questions = t.filter(isQuestion);
      expect(questions, `questions in ${ts}`).toHaveLength(1);
      expect(answersIn(ts), `answers in ${ts}`).toHaveLength(1);
      expect(textOf(questions[0] as FakeMessage)).toMatch(new RegExp(`user_ada\` answered: \\*${chosen}\\*`));
    }
    // The approved effect reported once in thread one; the denied one never in thread two.
    const said = (t: FakeMessage[]) => t.map((m) => textOf(m)).join("\n");
    expect(said(one).match(/The invitation went out/g)?.length ?? 0).toBeLessThanOrEqual(1);
    expect(said(two)).not.toMatch(/The invitation went out/);
    await s.stop();
  }, 600_000);
});
