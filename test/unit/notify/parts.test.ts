import { TaskState } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { rootTaskUrn } from "../../../shared/engine/steps/planner.ts";
import { matchesPattern } from "../../../shared/kernel/event-pattern/index.ts";
import { DEFAULT_RETRY, nextAttempt, retryDelayMs } from "../../../shared/notify/backoff.ts";
import {
  a2aPushBody,
  a2aTask,
  answerParts,
  callbackBody,
  MAX_NOTIFIED_ANSWER_CHARS,
  notifiedAnswer,
} from "../../../shared/notify/payloads.ts";
import { signatureHeader } from "../../../shared/notify/signing.ts";
import type { Standing } from "../../../shared/notify/standing.ts";
import type { A2aPushSubscription } from "../../../shared/notify/subscriptions.ts";
import { notifyUrls } from "../../../shared/notify/urls.ts";
import { NOTIFY_WAKE_PATTERNS, requestOf, requestOfWakeup } from "../../../shared/notify/wakeups.ts";
import { DEFAULT_OUTBOUND } from "../../../shared/outbound/policy.ts";

/** The notify path's pure parts: backoff, wake-ups, the URL rule, payloads in both A2A versions, signatures. */
const MESSAGE = "cld:common.Tenant.acme/common.Conversation.c1/common.Message.m1";
const ROOT = rootTaskUrn(MESSAGE);
const CHILD = `${ROOT}/plan.Task.child`;

describe("backoff", () => {
  it("doubles from 10 s up to 10 min, with jitter in [0.5, 1) of the delay", () => {
    expect(retryDelayMs(DEFAULT_RETRY, 1, () => 0)).toBe(5_000);
    expect(retryDelayMs(DEFAULT_RETRY, 1, () => 0.999)).toBeLessThan(10_000);
    expect(retryDelayMs(DEFAULT_RETRY, 3, () => 0)).toBe(20_000);
    expect(retryDelayMs(DEFAULT_RETRY, 30, () => 0.999)).toBeLessThan(DEFAULT_RETRY.maxDelayMs);
    expect(retryDelayMs(DEFAULT_RETRY, 30, () => 0)).toBe(DEFAULT_RETRY.maxDelayMs / 2);
  });

  it("gives up only once an attempt at or after the end of the hour has failed; the last try lands on the end", () => {
    const from = new Date("2026-06-01T09:00:00.000Z");
    const at = (min: number) => new Date(from.getTime() + min * 60_000);
    const base = { attempts: 9, retryFrom: from, random: () => 0.9 };
    expect(nextAttempt(DEFAULT_RETRY, { ...base, now: at(58) })).toEqual(at(60));
    expect(nextAttempt(DEFAULT_RETRY, { ...base, now: at(60) })).toBeUndefined();
  });
});

describe("wake-ups", () => {
  it("name the request an event concerns: outputs, interactions, answers, starts and plans", () => {
    expect(requestOf(`${CHILD}/common.Message.output`)).toBe(ROOT);
    expect(requestOf(MESSAGE)).toBeUndefined();
    expect(requestOf("not a urn")).toBeUndefined();
    const env = (type: string, detail: Record<string, unknown>) => ({ "detail-type": type, detail });
    expect(requestOfWakeup(env("RESOURCE_PUT", { urn: `${CHILD}/common.Message.output` }))).toBe(ROOT);
    expect(requestOfWakeup(env("INTERACTION_REQUESTED", { taskId: CHILD }))).toBe(ROOT);
    expect(
      requestOfWakeup(env("INTERACTION_ANSWERED", { interactionUrn: `${CHILD}/uip.Interaction.q` })),
    ).toBe(ROOT);
    expect(requestOfWakeup(env("TASK_READY", { taskId: ROOT }))).toBe(ROOT);
    expect(requestOfWakeup(env("PLAN_REQUESTED", { messageUrn: MESSAGE }))).toBe(ROOT);
  });

  it("the patterns (the AWS rule's too) match the engine's events and nothing else", () => {
    const matches = (e: Record<string, unknown>) => NOTIFY_WAKE_PATTERNS.some((p) => matchesPattern(p, e));
    expect(
      matches({ source: "arbor", "detail-type": "RESOURCE_PUT", detail: { name: "output", urn: ROOT } }),
    ).toBe(true);
    expect(matches({ source: "arbor", "detail-type": "RESOURCE_PUT", detail: { name: "plan" } })).toBe(false);
    for (const t of ["INTERACTION_REQUESTED", "INTERACTION_ANSWERED", "TASK_READY", "PLAN_REQUESTED"])
      expect(matches({ source: "arbor.engine", "detail-type": t, detail: {} }), t).toBe(true);
    expect(matches({ source: "arbor.engine", "detail-type": "TURN_REQUESTED", detail: {} })).toBe(false);
    // A task's first turn (it started: elected, in progress) and a turn after an answer wake; later turns not.
    for (const turn of [0, 1])
      expect(matches({ source: "arbor.engine", "detail-type": "TURN_REQUESTED", detail: { turn } })).toBe(
        true,
      );
    expect(matches({ source: "arbor.engine", "detail-type": "TURN_REQUESTED", detail: { turn: 2 } })).toBe(
      false,
    );
    expect(requestOfWakeup({ "detail-type": "TURN_REQUESTED", detail: { taskId: CHILD, turn: 1 } })).toBe(
      ROOT,
    );
  });
});

describe("webhook URLs", () => {
  it("https only; loopback (any port) only with the development switch; credentials, private and metadata refused", () => {
    const strict = notifyUrls();
    const dev = notifyUrls(undefined, { allowLoopbackHttp: true });
    expect(strict.refusal("https://hooks.example.com/a")).toBeUndefined();
    expect(strict.refusal("http://hooks.example.com/a")).toMatch(/must be https/);
    expect(strict.refusal("http://127.0.0.1:9999/a")).toMatch(/ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP/);
    expect(strict.refusal("https://127.0.0.1/a")).toMatch(/loopback/);
    // Names that are loopback by definition (RFC 6761) are refused when given too, not only at send.
    for (const url of ["https://localhost/a", "https://LOCALHOST./a", "https://hooks.localhost/a"])
      expect(strict.refusal(url), url).toMatch(/loopback.*ARBOR_NOTIFY_ALLOW_LOOPBACK_HTTP/);
    // ...unless the operator lets webhooks reach them (ARBOR_WEBHOOK_ALLOW), never through the tools' list.
    expect(notifyUrls(undefined, { allow: ["localhost"] }).refusal("https://localhost/a")).toBeUndefined();
    expect(notifyUrls({ ...DEFAULT_OUTBOUND, allow: ["localhost"] }).refusal("https://localhost/a")).toMatch(
      /loopback/,
    );
    expect(dev.refusal("http://127.0.0.1:9999/a")).toBeUndefined();
    expect(dev.refusal("http://localhost:9999/a")).toBeUndefined();
    expect(dev.refusal("http://hooks.example.com/a")).toMatch(/must be https/);
    for (const url of [
      "https://10.0.0.1/a",
      "https://169.254.169.254/latest",
      "https://[fd00:ec2::254]/a",
      "https://user:pw@hooks.example.com/a",
      "https://hooks.example.com:8443/a",
      "ftp://hooks.example.com/a",
      "nope",
    ])
      expect(dev.refusal(url), url).toBeDefined();
  });
});

describe("payloads", () => {
  const view = { title: "Cost per person" } as never;
  const done: Standing = { state: "completed", view, output: "100 EUR" };
  const sub = (protocol: "1.0" | "0.3", acceptedOutputModes?: string[]): A2aPushSubscription => ({
    kind: "a2a-push",
    id: "cfg",
    url: "https://hooks.example.com/a",
    token: "tok",
    protocol,
    a2aTaskId: "task-1",
    contextId: "ctx-1",
    tenant: "acme",
    ...(acceptedOutputModes ? { acceptedOutputModes } : {}),
  });
  const stamp = { newId: () => "m1", now: () => new Date("2026-06-01T09:00:00.000Z") };

  it("1.0: a StreamResponse carrying the Task, by the SDK's serializer", () => {
    const task = a2aTask(sub("1.0"), done, stamp, ROOT);
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const { body, contentType } = a2aPushBody(sub("1.0"), task);
    expect(contentType).toMatch(/application\/a2a\+json/);
    const json = JSON.parse(body);
    expect(json.task).toMatchObject({
      id: "task-1",
      contextId: "ctx-1",
      status: { state: "TASK_STATE_COMPLETED" },
    });
    expect(json.task.artifacts[0].parts[0]).toMatchObject({ text: "100 EUR" });
  });

  it("0.3: the Task in 0.3's shape (kind, lower-case states, parts with kind)", () => {
    const { body, contentType } = a2aPushBody(sub("0.3"), a2aTask(sub("0.3"), done, stamp, ROOT));
    expect(contentType).toMatch(/json/);
    const json = JSON.parse(body);
    expect(json).toMatchObject({
      kind: "task",
      id: "task-1",
      contextId: "ctx-1",
      status: { state: "completed" },
    });
    expect(json.artifacts[0].parts).toContainEqual({ kind: "text", text: "100 EUR" });
  });

  it("the answer as the caller accepts it, in the shape of every A2A answer: text, and a data part { result, title } for JSON", () => {
    const answer = { output: "x", title: "Cost" };
    expect(answerParts(answer, undefined).map((p) => p.content?.$case)).toEqual(["text"]);
    expect(answerParts(answer, ["text/plain", "application/json"]).map((p) => p.content?.$case)).toEqual([
      "text",
      "data",
    ]);
    expect(answerParts(answer, ["application/json"])[0]?.content).toEqual({
      $case: "data",
      value: { result: "x", title: "Cost" },
    });
    expect(answerParts(answer, ["image/png"]).map((p) => p.content?.$case)).toEqual(["text"]);
  });

  it("a long answer is cut in a notification, saying where the whole answer is", () => {
    expect(notifiedAnswer("short")).toBe("short");
    const long = "a".repeat(MAX_NOTIFIED_ANSWER_CHARS + 10);
    const cut = notifiedAnswer(long);
    expect(cut.length).toBeLessThan(MAX_NOTIFIED_ANSWER_CHARS + 300);
    expect(cut).toMatch(/cut at 64000 of 64010 characters: read the whole answer with GetTask/);
  });

  it("a callback: id, type, taskId, state, answer, at; signed over t and the raw body", () => {
    const { body } = callbackBody(
      { kind: "callback", id: "c", url: "https://h.example.com", tenant: "acme" },
      done,
      {
        eventId: "dlv_1",
        rootTaskUrn: ROOT,
        at: "2026-06-01T09:00:00.000Z",
      },
    );
    expect(JSON.parse(body)).toEqual({
      id: "dlv_1",
      type: "task.completed",
      taskId: ROOT,
      state: "completed",
      answer: "100 EUR",
      at: "2026-06-01T09:00:00.000Z",
    });
    const header = signatureHeader(
      { current: { secret: "whsec_x", createdAt: "" } },
      body,
      new Date("2026-06-01T09:00:00.000Z"),
    );
    expect(header).toMatch(/^t=1780304400,v1=[0-9a-f]{64}$/);
  });
});
