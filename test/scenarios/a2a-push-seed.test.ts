import { randomUUID } from "node:crypto";
import { LegacyJsonRpcTransportHandler } from "@a2a-js/sdk/compat/v0_3/server";
import { defaultServerCallContextBuilder } from "@a2a-js/sdk/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arborAgentCard } from "../../shared/channels/a2a/a2a-server.ts";
import { ArborCaller } from "../../shared/channels/a2a/a2a-store.ts";
import { ArborA2aTasks } from "../../shared/channels/a2a/a2a-tasks.ts";
import { authenticatedAs } from "../../shared/ports/key-store.ts";
import type { LocalNotify } from "../../shared/runtime/local/local-notify.ts";
import { seed003Request } from "../fixtures/seed-003.ts";
import { ANSWER, ada, type serveA2a } from "./a2a-fixtures.ts";
import type { Harness } from "./engine-harness.ts";
import { type PushWorld, type Receiver, startPushWorld, stopPushWorld, until } from "./notify-fixture.ts";

/**
 * Seed 003 section 8.1's request, sent verbatim as a client written from that document sends it:
 * raw JSON-RPC `message/send` (protocol 0.3: no A2A-Version header), `blocking: false`, a
 * `pushNotificationConfig` with url and token. The answer is an immediate ACK (submitted or
 * working); the webhook then receives the final Task (0.3 shape: `kind: "task"`) with
 * `Authorization: Bearer <token>` and the artifacts. The first test goes through the served
 * endpoint (it needs the endpoint's 0.3 support); the second sends the same body through the
 * SDK's own 0.3 JSON-RPC handler in front of Arbor's request handler, in process.
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

/** The final Task the webhook at `path` received with `token`, checked as seed 003 section 8.3 reads it. */
async function finalTaskAt(path: string, token: string, taskId: string | undefined): Promise<void> {
  const completed = (r: Receiver["got"][number]) =>
    r.path === path && JSON.parse(r.body).status?.state === "completed";
  await until("the final Task at the webhook", () => receiver.got.some(completed));
  const final = receiver.got.find(completed);
  expect(final?.headers.authorization).toBe(`Bearer ${token}`);
  const task = JSON.parse(final?.body ?? "{}") as {
    id: string;
    kind: string;
    artifacts: { parts: { kind: string; text?: string }[] }[];
  };
  expect(task).toMatchObject({ id: taskId, kind: "task" });
  expect(task.artifacts[0]?.parts).toContainEqual({ kind: "text", text: ANSWER });
}

describe("seed 003 section 8.1, verbatim", () => {
  it("message/send with blocking false and a push config: an ACK at once, then the final Task at the webhook", async () => {
    const token = randomUUID();
    const body = seed003Request(`${receiver.url}/api/webhook/tasks`, token);
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

    await finalTaskAt("/api/webhook/tasks", token, json.result?.id);
  });

  it("the same request through the SDK's 0.3 JSON-RPC handler in front of Arbor's: an ACK, then the final Task", async () => {
    const card = arborAgentCard("http://localhost", { streaming: true, pushNotifications: true });
    const tasks = new ArborA2aTasks({
      engine: h.engine,
      card,
      log: h.engine.deps.log,
      notify: notify.service,
    });
    const legacy = new LegacyJsonRpcTransportHandler(tasks);
    const context = defaultServerCallContextBuilder({
      extensions: undefined,
      user: new ArborCaller(authenticatedAs(ada.entry)),
      headers: {},
    });
    expect(context.requestedVersion).toBe("0.3");
    const token = randomUUID();
    const out = (await legacy.handle(seed003Request(`${receiver.url}/seed/in-process`, token), context)) as {
      result?: { id: string; kind: string; status: { state: string } };
      error?: unknown;
    };
    expect(out.error).toBeUndefined();
    expect(out.result?.kind).toBe("task");
    expect(["submitted", "working"]).toContain(out.result?.status.state);
    await finalTaskAt("/seed/in-process", token, out.result?.id);
  });
});
