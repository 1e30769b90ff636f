import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readSse } from "../scenarios/sse-client.ts";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor replay` after requests that were followed over server-sent events: following a request
 * writes its feed (`feed#<root>`, a copy of its tasks' events, shared/notify/feed.ts) into the event
 * log. Replay rebuilds task views from the tasks' own streams only, so a feed is never taken for a
 * task and reported as differing.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let key: string;
let served: Served | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-serve-replay-"));
  env = arborEnv(join(dir, "data"));
  key = await addKey(env, "user_ada");
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("arbor replay after a request followed over SSE", () => {
  it("compares task views only: exit 0, nothing differs", async () => {
    served = await startServe(env, ["--example", "offsite"]);
    const { url } = served;
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    const sent = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers,
      body: JSON.stringify({ text: "Plan a two-day team offsite in Lisbon for 12 people" }),
    });
    expect(sent.status).toBe(202);
    const { rootTaskId } = (await sent.json()) as { rootTaskId: string };
    const task = `${url}/v1/tasks/${encodeURIComponent(rootTaskId)}`;

    // Followed until it asks (the risky send_email), then answered, then followed to its end.
    const asked = await readSse(`${task}/events`, {
      headers,
      until: (events) => events.some((e) => e.event === "UserInteractionRequested"),
    });
    expect(asked.status).toBe(200);
    const pending = await eventually(
      async () =>
        (await (await fetch(`${task}/interactions`, { headers })).json()) as {
          interactions: { links: { answer: string } }[];
        },
      (body) => body.interactions.length > 0,
    );
    const answer = pending.interactions[0]?.links.answer as string;
    const answered = await fetch(`${url}${answer}`, {
      method: "POST",
      headers,
      body: JSON.stringify({ selectedOptionId: "approve" }),
    });
    expect(answered.status).toBe(204);
    const followed = await readSse(`${task}/events`, { headers });
    expect(followed.ended).toBe(true);
    expect(followed.events.at(-1)?.event).toBe("end");
    expect(followed.events.some((e) => e.event === "TaskCompleted")).toBe(true);

    // Replay reads the log beside the running server (it takes no lock), and again once it stopped.
    const beside = await arborCli(["replay"], env);
    expect(beside.stdout).not.toMatch(/differs/);
    expect(beside.stdout).toMatch(/ 0 differ from the stored views/);
    expect(beside.code).toBe(0);
    await served.stop();
    const after = await arborCli(["replay"], env);
    expect(after.stdout).not.toMatch(/differs/);
    expect(after.stdout).toMatch(/8 task views rebuilt, 0 differ/);
    expect(after.code).toBe(0);
  }, 120_000);
});
