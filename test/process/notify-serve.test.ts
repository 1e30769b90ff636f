import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Receiver, startReceiver, until, verifyCallback } from "../scenarios/notify-fixture.ts";
import { addKey, arborEnv, killAll, killHard, startServe } from "../support/arbor-process.ts";

/**
 * `arbor serve` as a real process delivers callbacks: a receiver that is down when the request is
 * made, a serve killed with SIGKILL between attempts, a new serve on the same data folder: every
 * notification arrives, once by id, signed, within seconds of the restart; SIGTERM stops the
 * worker with the server. The scripted offsite example as the model; the loopback receiver
 * allowed by ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let key: string;
let receiver: Receiver;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-notify-serve-"));
  env = arborEnv(join(dir, "data"), { ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP: "true" });
  key = await addKey(env, "user_ada");
  receiver = await startReceiver();
});
afterAll(async () => {
  await killAll();
  await receiver?.close();
  await rm(dir, { recursive: true, force: true });
});

const serve = () => startServe(env, ["--example", "offsite"]);

describe("arbor serve delivers callbacks", () => {
  it("across a SIGKILL between attempts: each notification once by id, signed", async () => {
    receiver.answer = () => 503; // down for now
    const first = await serve();
    const res = await fetch(`${first.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "Plan the offsite", callbackUrl: `${receiver.url}/hooks` }),
    });
    expect(res.status).toBe(202);
    await until("a first, failed attempt", () => receiver.got.length >= 1, 60_000);
    await killHard(first);
    const failed = new Set(receiver.got.map((g) => String(g.headers["arbor-delivery-id"])));

    receiver.answer = () => 200;
    const second = await serve();
    await until(
      "the failed notifications, delivered by the new process",
      () => [...failed].every((id) => receiver.deliveredIds().has(id)),
      60_000,
    );
    const secret = (await (
      await fetch(`${second.url}/v1/callbacks/secret`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { secret: string };
    const seen = new Set<string>();
    for (const g of receiver.got.filter((x) => x.answered === 200)) {
      const t = Number(/t=(\d+)/.exec(String(g.headers["arbor-signature"]))?.[1]);
      expect(
        verifyCallback(secret.secret, String(g.headers["arbor-signature"]), g.body, t, seen),
      ).toMatchObject({
        ok: true,
        duplicate: false,
      });
    }
    expect([...receiver.deliveredIds().values()].every((n) => n === 1)).toBe(true);
    await second.stop();
    expect(await second.exited).toBe(0);
  }, 300_000);

  it("an A2A send acknowledged with a push config, SIGKILL right after the ACK: a new process pushes the final Task with the token", async () => {
    receiver.answer = () => 200;
    const first = await serve();
    // Seed 003's request as a 0.3 client sends it: not blocking, a push config with a token.
    const res = await fetch(`${first.url}/a2a`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "message/send",
        params: {
          message: {
            kind: "message",
            messageId: "m-kill",
            role: "user",
            parts: [{ kind: "text", text: "Plan the offsite" }],
          },
          configuration: {
            blocking: false,
            pushNotificationConfig: { url: `${receiver.url}/push-kill`, token: "tok-kill" },
          },
        },
      }),
    });
    const ack = (await res.json()) as { result: { id: string; status: { state: string } } };
    await killHard(first); // at once: whatever the ACK promised is on disk, nothing more
    // What reached the receiver before the kill: on a busy machine the first process may have sent
    // the first push already (and died before recording it: the new one sends it again, same id).
    const beforeKill = receiver.got.length;
    expect(["submitted", "working"]).toContain(ack.result.status.state);

    const second = await serve();
    const pushes = () => receiver.got.filter((g) => g.path === "/push-kill" && g.answered === 200);
    const pushed = (state: string) =>
      pushes().find((g) => (JSON.parse(g.body) as { status: { state: string } }).status.state === state);
    // The offsite asks before it sends its email: the new process pushes the question...
    await until(
      "the question, pushed by the new process",
      () => pushed("input-required") !== undefined,
      60_000,
    );
    const answer = await fetch(`${second.url}/a2a`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 2,
        method: "message/send",
        params: {
          message: {
            kind: "message",
            messageId: "m-kill-answer",
            role: "user",
            taskId: ack.result.id,
            parts: [{ kind: "text", text: "approve" }],
          },
          configuration: { blocking: false },
        },
      }),
    });
    expect(((await answer.json()) as { error?: unknown }).error).toBeUndefined();
    // ...and, answered, the final Task with the caller's token.
    await until("the final Task", () => pushed("completed") !== undefined, 60_000);
    const got = pushed("completed");
    expect(got?.headers.authorization).toBe("Bearer tok-kill");
    expect(got?.headers["x-a2a-notification-token"]).toBe("tok-kill");
    expect(JSON.parse(got?.body ?? "{}")).toMatchObject({ kind: "task", id: ack.result.id });
    // The new process sends each notification once by id; an id sent twice was first sent by the
    // process that was killed (at least once: receivers deduplicate on the id).
    const idOf = (g: (typeof receiver.got)[number]) => String(g.headers["arbor-delivery-id"]);
    const byNew = receiver.got.slice(beforeKill).filter((g) => g.path === "/push-kill" && g.answered === 200);
    expect(new Set(byNew.map(idOf)).size).toBe(byNew.length);
    const byKilled = new Set(receiver.got.slice(0, beforeKill).map(idOf));
    const ids = pushes().map(idOf);
    for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i))) expect(byKilled).toContain(id);
    await second.stop();
    expect(await second.exited).toBe(0);
  }, 120_000);
});
