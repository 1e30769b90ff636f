/**
 * How fast `arbor serve` acknowledges Slack (Slack wants an answer within 3 s, and retries after):
 * a real `arbor serve` (durable SQLite, the example team, the scripted model) with a chat settings
 * file pointing at the fake Slack API, and signed `app_mention` events POSTed to /slack/events.
 * An ack means the request is on disk and its thread subscribed (the work goes on after it).
 *
 *   node bench/slack-ack.ts              # 100 mentions one after another, then 100 with 20 in flight
 *   node bench/slack-ack.ts --count 200
 *
 * Prints p50 / p95 / max of the time from sending a mention to its 200, and how many progress
 * messages reached the fake Slack within two minutes after (the threads moving). Not a test: times
 * vary with the machine.
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signSlackBody } from "../shared/channels/chat/slack/verify.ts";
import { eventCallback, startFakeSlack } from "../test/peers/fake-slack.ts";
import { addKey, arborEnv, startServe } from "../test/support/arbor-process.ts";
import { eventually } from "../test/support/until.ts";

const SECRET = "bench-signing-secret";
/**
 * Ten workspaces of twenty people each, taken in turn: every mention is within the Slack routes'
 * rate limits (10 a person, 100 a workspace at once), so each one is a request taken, not refused.
 */
const WORKSPACES = Array.from({ length: 10 }, (_, i) => ({ team: `T0BENCH${i}`, token: `xoxb-bench-${i}` }));
const PEOPLE = 20;
const at = process.argv.indexOf("--count");
/** Mentions per phase: at most 200 (each person and workspace stays within its limits). */
const COUNT = Math.min(200, at > 0 ? Number(process.argv[at + 1]) : 100);
const IN_FLIGHT = 20;

const dir = await mkdtemp(join(tmpdir(), "arbor-bench-slack-"));
const dataDir = join(dir, "data");
const env = arborEnv(dataDir);
await addKey(env, "user_ada");
const slack = await startFakeSlack({ tokens: Object.fromEntries(WORKSPACES.map((w) => [w.token, w.team])) });
const file = join(dataDir, "chat.json");
await writeFile(
  file,
  JSON.stringify({
    slack: {
      signingSecret: SECRET,
      apiUrl: slack.apiUrl,
      workspaces: Object.fromEntries(WORKSPACES.map((w) => [w.team, { tenant: "acme", botToken: w.token }])),
    },
  }),
  { mode: 0o600 },
);
await chmod(file, 0o600);
const served = await startServe(env, ["--example", "offsite"]);

let n = 0;
async function mention(): Promise<number> {
  n++;
  const workspace = WORKSPACES[n % WORKSPACES.length] as (typeof WORKSPACES)[number];
  const body = eventCallback({
    team: workspace.team,
    eventId: `Ev_BENCH_${n}`,
    event: {
      type: "app_mention",
      user: `U_${Math.floor(n / WORKSPACES.length) % PEOPLE}`,
      channel: "C_BENCH",
      ts: `1780000000.${String(n).padStart(6, "0")}`,
      text: "<@UBOT> plan the offsite",
    },
  });
  const headers = signSlackBody(SECRET, body, Math.floor(Date.now() / 1000));
  const started = performance.now();
  const res = await fetch(`${served.url}/slack/events`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`Slack event answered ${res.status}`);
  return performance.now() - started;
}

const say = (line: string) => process.stdout.write(`${line}\n`);
const stats = (ms: number[]) => {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => (s[Math.min(s.length - 1, Math.floor(p * s.length))] as number).toFixed(1);
  return `p50 ${q(0.5)} ms   p95 ${q(0.95)} ms   max ${(s[s.length - 1] as number).toFixed(1)} ms`;
};

try {
  await mention(); // warm-up: the first request loads the routes' code
  const serial: number[] = [];
  for (let i = 0; i < COUNT; i++) serial.push(await mention());
  const parallel: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < COUNT) parallel.push(await mention());
    }),
  );
  say(`Slack mention -> 200, ${COUNT} one after another:   ${stats(serial)}`);
  say(`Slack mention -> 200, ${COUNT} with ${IN_FLIGHT} in flight: ${stats(parallel)}`);
  const threads = 2 * COUNT + 1;
  const posted = await eventually(
    async () => new Set(slack.calls("chat.postMessage").map((c) => String(c.args.thread_ts))).size,
    (k) => k >= threads,
    120_000,
  );
  say(`threads with a first message from Arbor within two minutes: ${posted} of ${threads}`);
} finally {
  await served.stop();
  await slack.close();
  await rm(dir, { recursive: true, force: true });
}
