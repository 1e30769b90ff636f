import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalNotify, startLocalNotify } from "../../shared/runtime/local-notify.ts";
import { ANSWER, a2aScript, ada, serveA2a, TEAM } from "./a2a-fixtures.ts";
import { Harness } from "./engine-harness.ts";
import { type Receiver, startReceiver, until } from "./notify-fixture.ts";

/**
 * Seed 003 section 8.1's request, sent verbatim as a client written from that document sends it:
 * raw JSON-RPC `message/send` (protocol 0.3: no A2A-Version header), `blocking: false`, a
 * `pushNotificationConfig` with url and token. The answer is an immediate ACK (submitted or
 * working); the webhook then receives the final Task (0.3 shape: `kind: "task"`) with
 * `Authorization: Bearer <token>` and the artifacts.
 */
let h: Harness;
let notify: LocalNotify;
let served: Awaited<ReturnType<typeof serveA2a>>;
let receiver: Receiver;

beforeAll(async () => {
  h = await Harness.create({ script: a2aScript(200), assistants: TEAM, settings: { electionThreshold: -1 } });
  notify = startLocalNotify(h.engine, { notify: { allowLoopbackHttp: true }, worker: { tickMs: 60_000 } });
  served = await serveA2a(h.engine, { notify: notify.service });
  receiver = await startReceiver();
});
afterAll(async () => {
  await served?.close();
  await notify?.stop();
  await receiver?.close();
  await h?.close();
});

describe("seed 003 section 8.1, verbatim", () => {
  it("message/send with blocking false and a push config: an ACK at once, then the final Task at the webhook", async () => {
    const token = randomUUID();
    const webhook = `${receiver.url}/api/webhook/tasks`;
    const body = `{
  "jsonrpc": "2.0",
  "id": "${randomUUID()}",
  "method": "message/send",
  "params": {
    "message": {
      "kind": "message",
      "messageId": "${randomUUID()}",
      "role": "user",
      "parts": [{ "kind": "text", "text": "What is the cost per person?" }],
      "contextId": "${randomUUID()}"
    },
    "configuration": {
      "blocking": false,
      "acceptedOutputModes": ["text/plain", "application/json"],
      "pushNotificationConfig": {
        "url": "${webhook}",
        "token": "${token}"
      }
    }
  }
}`;
    const res = await fetch(`${served.url}/a2a`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ada.key}` },
      body,
    });
    const json = (await res.json()) as {
      result?: { id: string; kind: string; status: { state: string } };
      error?: unknown;
    };
    expect(json.error).toBeUndefined();
    expect(json.result?.kind).toBe("task");
    expect(["submitted", "working"]).toContain(json.result?.status.state);
    const taskId = json.result?.id;

    await until("the final Task at the webhook", () =>
      receiver.got.some(
        (r) => r.path === "/api/webhook/tasks" && JSON.parse(r.body).status?.state === "completed",
      ),
    );
    const final = receiver.got.find(
      (r) => r.path === "/api/webhook/tasks" && JSON.parse(r.body).status?.state === "completed",
    );
    expect(final?.headers.authorization).toBe(`Bearer ${token}`);
    const task = JSON.parse(final?.body ?? "{}") as {
      id: string;
      kind: string;
      artifacts: { parts: { kind: string; text?: string }[] }[];
    };
    expect(task).toMatchObject({ id: taskId, kind: "task" });
    expect(task.artifacts[0]?.parts).toContainEqual({ kind: "text", text: ANSWER });
  });
});
