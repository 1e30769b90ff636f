import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUEST } from "../../examples/offsite/scenario.ts";
import { addKey, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor serve --example offsite` as a new user meets it: the example's scripted model plays the
 * offsite for requests about the offsite, answers what else it can (a sum, as in the README's A2A
 * example) with a small plan that fits it, says plainly what it cannot answer, and never reports
 * an effect that did not happen (the invitation after a person chose Deny).
 */
let dir: string;
let served: Served;
let headers: Record<string, string>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-serve-example-"));
  const env = arborEnv(join(dir, "data"));
  const key = await addKey(env, "user_ada");
  headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  served = await startServe(env, ["--example", "offsite"]);
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

interface TaskBody {
  task: { status: string } | null;
  output: string | null;
}
const taskUrl = (urn: string) => `${served.url}/v1/tasks/${encodeURIComponent(urn)}`;
const read = async (urn: string) => (await (await fetch(taskUrl(urn), { headers })).json()) as TaskBody;
const ended = (urn: string) =>
  eventually(
    () => read(urn),
    (b) => ["done", "failed", "canceled"].includes(b.task?.status ?? ""),
    60_000,
  );
async function send(text: string): Promise<string> {
  const res = await fetch(`${served.url}/v1/messages`, {
    method: "POST",
    headers,
    body: JSON.stringify({ text }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { rootTaskId: string }).rootTaskId;
}
async function tree(urn: string): Promise<{ taskCount: number; tree: { title: string } }> {
  return (await (await fetch(`${taskUrl(urn)}/tree`, { headers })).json()) as never;
}

describe("arbor serve --example offsite", () => {
  it("answers the README's A2A example (a sum) with a small plan of its own, not the offsite", async () => {
    const res = await fetch(`${served.url}/a2a`, {
      method: "POST",
      headers: { ...headers, "A2A-Version": "1.0" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: {
          message: {
            messageId: "m1",
            role: "ROLE_USER",
            parts: [{ text: "What is 1200 EUR shared by 12 people?" }],
          },
        },
      }),
    });
    expect(res.status).toBe(200);
    const { result } = (await res.json()) as {
      result: {
        task: {
          status: { state: string };
          artifacts: { parts: { text: string }[] }[];
          metadata: {
            arbor: {
              rootTaskId: string;
              usage: { inputTokens: number; outputTokens: number; costUsd: number; unpricedCalls: number };
            };
          };
        };
      };
    };
    expect(result.task.status.state).toBe("TASK_STATE_COMPLETED");
    // The request's tokens and cost ride with the task: the example's scripted model costs nothing.
    expect(result.task.metadata.arbor.usage).toEqual({
      inputTokens: expect.any(Number),
      outputTokens: expect.any(Number),
      costUsd: 0,
      unpricedCalls: 0,
    });
    expect(result.task.metadata.arbor.usage.inputTokens).toBeGreaterThan(0);
    const answer = result.task.artifacts[0]?.parts[0]?.text ?? "";
    expect(answer).toMatch(/\b100 EUR each\b/);
    expect(answer).not.toMatch(/Lisbon|offsite|venue|invitation/i);
    const planned = await tree(result.task.metadata.arbor.rootTaskId);
    expect(planned.taskCount).toBe(1);
  }, 120_000);

  it("says plainly what it cannot answer, and how to get a real model", async () => {
    const root = await send("Write a haiku about autumn rain");
    const done = await ended(root);
    expect(done.task?.status).toBe("done");
    expect(done.output).toMatch(/offline example/);
    expect(done.output).toContain("Write a haiku about autumn rain");
    expect(done.output).toMatch(/ARBOR_MODEL_PROVIDER/);
    // Not the offsite's plan (the answer may name the example's own request).
    expect(done.output).not.toMatch(/Logistics|Book travel|Invite the team|LX Factory/);
    expect((await tree(root)).taskCount).toBe(1);
  }, 120_000);

  it("plays the offsite for the offsite, and after Deny its answer says the invitation was not sent", async () => {
    const root = await send(REQUEST);
    const asked = await eventually(
      async () =>
        (await (await fetch(`${taskUrl(root)}/interactions`, { headers })).json()) as {
          interactions: { purpose: string; links: { answer: string } }[];
        },
      (b) => b.interactions.length > 0,
      60_000,
    );
    const question = asked.interactions[0];
    expect(question?.purpose).toBe("confirm_risky_action");
    const denied = await fetch(`${served.url}${question?.links.answer}`, {
      method: "POST",
      headers,
      body: JSON.stringify({ selectedOptionId: "deny" }),
    });
    expect(denied.status).toBe(204);
    const done = await ended(root);
    expect(done.task?.status).toBe("done");
    expect(done.output).toMatch(/Invite the team: The invitation was not sent/);
    expect(done.output).not.toMatch(/went out|was sent\b|queued for/);
    expect((await tree(root)).tree.title).toBe("Plan the offsite");
  }, 120_000);
});
