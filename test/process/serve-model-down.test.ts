import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChatWireRequest, FakeOpenAi } from "../peers/fake-openai.ts";
import { readSse } from "../scenarios/sse-client.ts";
import { addKey, arborEnv, killAll, startServe } from "../support/arbor-process.ts";
import { eventually, until } from "../support/until.ts";

/**
 * `arbor serve` with a model it cannot use, as a caller meets it over HTTP: a model server that
 * cannot be reached fails the request once the failure has lasted ARBOR_MODEL_RETRY_MS, with the
 * reason and what to do next on the task (GET and its event stream), and /healthz says the model
 * is unreachable, quickly; a model that comes back within the window is retried and the request
 * completes; a model that refuses the configuration (a wrong base URL: 404) fails it at once.
 * Each test has a server of its own, so the three run at once: most of their time is waiting.
 */
let dir: string;
const fakes: FakeOpenAi[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-model-down-"));
});
afterAll(async () => {
  await killAll();
  await Promise.all(fakes.map((f) => f.stop()));
  await rm(dir, { recursive: true, force: true });
});

/** A port nothing listens on (taken from the OS, then let go). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function serveWith(name: string, baseUrl: string, retryMs: number) {
  const env = arborEnv(join(dir, name), {
    ARBOR_MODEL_PROVIDER: "openai",
    ARBOR_OPENAI_BASE_URL: baseUrl,
    ARBOR_MODEL: "llama3.1",
    ARBOR_MODEL_RETRY_MS: String(retryMs),
    POWERTOOLS_LOG_LEVEL: "WARN",
  });
  const key = await addKey(env, "user_ada");
  const served = await startServe(env);
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };
  const send = async (text: string) => {
    const res = await fetch(`${served.url}/v1/messages`, {
      method: "POST",
      headers,
      body: JSON.stringify({ text }),
    });
    expect(res.status).toBe(202);
    return ((await res.json()) as { rootTaskId: string }).rootTaskId;
  };
  const task = (urn: string) => `${served.url}/v1/tasks/${encodeURIComponent(urn)}`;
  const read = async (urn: string) =>
    (await (await fetch(task(urn), { headers })).json()) as {
      task: { status: string; summary?: string; failureReason?: string };
      output: string | null;
    };
  return { served, headers, send, task, read };
}

interface Health {
  status: string;
  model?: { status: string; error?: string; since?: string };
}
async function health(url: string): Promise<{ status: number; ms: number; body: Health }> {
  const started = Date.now();
  const res = await fetch(`${url}/healthz`);
  return { status: res.status, ms: Date.now() - started, body: (await res.json()) as Health };
}

/** A model that plans one task and answers it. */
const planningModel = (body: ChatWireRequest) =>
  body.tools?.some((t) => t.function?.name === "create_plan")
    ? { toolCalls: [{ name: "create_plan", arguments: { name: "Say hello", purpose: "Greet the person" } }] }
    : { content: "Hello from the model." };

describe.concurrent("arbor serve with a model server that cannot be reached", () => {
  it("fails the request with the reason and what to do, on GET and its stream; /healthz says so, quickly", async () => {
    const port = await closedPort();
    const { served, headers, send, task, read } = await serveWith(
      "down",
      `http://127.0.0.1:${port}/v1`,
      2_000,
    );

    // Before any request: a bounded probe finds nobody there.
    const before = await health(served.url);
    expect(before.status).toBe(200);
    expect(before.ms).toBeLessThan(5_000);
    expect(before.body.status).toBe("degraded");
    expect(before.body.model?.status).toBe("unreachable");
    expect(before.body.model?.error).toContain(`127.0.0.1:${port}`);

    const root = await send("Plan my week");
    const streamed = await readSse(`${task(root)}/events`, { headers });
    expect(streamed.ended).toBe(true);
    const failed = streamed.events.find((e) => e.event === "TaskFailed");
    expect(failed, JSON.stringify(streamed.events.map((e) => e.event))).toBeDefined();
    const reason = (JSON.parse(failed?.data ?? "{}") as { payload: { reason: string } }).payload.reason;
    expect(reason).toMatch(/could not be planned/);
    expect(reason).toContain(`http://127.0.0.1:${port}/v1/chat/completions (ECONNREFUSED)`);
    expect(reason).toMatch(/ollama serve/);
    expect(reason).toMatch(/send the request again/i);

    const body = await read(root);
    expect(body.task.status).toBe("failed");
    expect(body.task.failureReason).toBe(reason);
    expect(body.output).toContain(reason);

    // Last known from the real calls, and still quick.
    const after = await health(served.url);
    expect(after.status).toBe(200);
    expect(after.ms).toBeLessThan(5_000);
    expect(after.body.model).toMatchObject({ status: "unreachable", since: expect.any(String) });
    expect(after.body.model?.error).toContain("ECONNREFUSED");
    // The server log says it too.
    expect(served.output()).toMatch(/the model failed for good.*ECONNREFUSED/);
  }, 90_000);

  it("retries a model that comes back within the window: the request completes", async () => {
    const port = await closedPort();
    const { served, send, read } = await serveWith("back", `http://127.0.0.1:${port}/v1`, 60_000);
    const root = await send("Say hello");
    // The model is down for a while (the calls fail, and are tried again), then it starts.
    await eventually(
      () => health(served.url),
      (h) => h.body.model?.status === "unreachable",
    );
    await until("a failed model call tried again", () =>
      /the model failed; trying again/.test(served.output()),
    );
    const fake = new FakeOpenAi(planningModel);
    fakes.push(fake);
    await fake.start(port);
    const done = await eventually(
      () => read(root),
      (b) => ["done", "failed", "canceled"].includes(b.task?.status ?? ""),
      60_000,
    );
    expect(done.task.status).toBe("done");
    expect(done.output).toBe("Hello from the model.");
    expect((await health(served.url)).body).toMatchObject({ status: "ok", model: { status: "ok" } });
  }, 120_000);

  it("fails at once, without waiting out the window, when the server refuses the configuration (404)", async () => {
    const fake = new FakeOpenAi(planningModel);
    fakes.push(fake);
    const { baseUrl } = await fake.start();
    // A base URL without /v1: the server answers 404, which no retry mends.
    const { send, read } = await serveWith("config", baseUrl.replace(/\/v1$/, ""), 240_000);
    const started = Date.now();
    const root = await send("Plan my week");
    const failed = await eventually(
      () => read(root),
      (b) => b.task?.status === "failed",
      30_000,
    );
    expect(failed.task.status).toBe("failed");
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(failed.task.failureReason).toMatch(
      /answered 404.*Check that baseUrl points at the OpenAI-compatible API/,
    );
  }, 60_000);
});
