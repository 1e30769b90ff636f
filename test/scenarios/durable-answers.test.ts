import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedLlm, type ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import { ApiKeys } from "../../shared/adapters/local/api-keys.ts";
import type { RunningServer } from "../../shared/channels/http/http-server.ts";
import type { Engine } from "../../shared/engine/engine.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { until } from "../support/until.ts";
import { a2aClient, ada, send, serveA2a, userMessage } from "./a2a-fixtures.ts";
import { serveHttp } from "./http-fixture.ts";
import { GENERALIST, isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";

/**
 * What an entry point answers is on disk first: the engine's submit, respond and cancel, and the
 * A2A endpoint's SendMessage (also with returnImmediately), resolve only once the WAL fsync that
 * covers their writes has finished. The local runtime runs durable here, with the fsync replaced by
 * a gate the test holds. Then the same runtime behind the HTTP API when the disk fails a flush
 * (/healthz says it cannot write), and when another process holds the database's write lock (503
 * at once, and /healthz answers meanwhile).
 */
const script: ScriptFunction = (r) => {
  if (isPlan(r)) return planOf({ name: "Answer", purpose: "Answer the question" });
  if (isEvaluation(r)) return pass();
  return { content: "Lisbon, 14-15 May." };
};
const PERSON = { id: "user_ada", kind: "human" } as const;

/** The fsync the database uses: counted, held while `gate` is set, failing once `broken`. */
const disk = {
  calls: 0,
  gate: undefined as Promise<void> | undefined,
  broken: false,
  async fsync(): Promise<void> {
    disk.calls++;
    await disk.gate;
    if (disk.broken) throw new Error("EIO: i/o error");
  },
};

let dir: string;
let rt: LocalRuntime;
let engine: Engine;
let stop: () => void;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-durable-"));
  rt = createLocalRuntime(
    { mode: "local", tenant: "acme", dataDir: join(dir, "data"), durable: true },
    { fsync: () => disk.fsync() },
  );
  engine = await createLocalEngine(rt, { llm: new ScriptedLlm(script), settings: { electionThreshold: -1 } });
  stop = engine.start();
  await engine.registerAssistants("acme", GENERALIST);
});
afterAll(async () => {
  stop?.();
  await engine?.close();
  await rt?.close().catch(() => undefined); // the last test breaks the disk
  await rm(dir, { recursive: true, force: true });
});

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};
/**
 * Runs `action` with the disk's flush held: it must not have answered by the time a flush began
 * and many more event-loop turns went by; once the flush is let go, it answers.
 */
async function answersOnlyOnceFlushed<T>(action: () => Promise<T>): Promise<T> {
  await rt.bus.idle();
  await rt.untilDurable();
  let release = () => {};
  disk.gate = new Promise<void>((r) => {
    release = r;
  });
  const before = disk.calls;
  let answered = false;
  const answer = action().finally(() => {
    answered = true;
  });
  await until("a flush to begin", () => disk.calls > before);
  await turns(50);
  expect(answered).toBe(false);
  disk.gate = undefined;
  release();
  return answer;
}

describe("an answer to a caller waits until what it acknowledges is on disk", () => {
  it("submit, respond and cancel resolve only after the flush that covers them", async () => {
    const submitted = await answersOnlyOnceFlushed(() =>
      engine.submit({ tenant: "acme", text: "Where is the offsite?", actor: PERSON, mode: "lazy" }),
    );
    await until(
      "the plan's approval",
      async () =>
        ((await engine.pendingInteractions(submitted.rootTaskId, { actor: PERSON }))?.length ?? 0) > 0,
    );
    const [approval] = (await engine.pendingInteractions(submitted.rootTaskId, { actor: PERSON })) ?? [];
    await answersOnlyOnceFlushed(() =>
      engine.respond(approval?.meta.id as string, { selectedOptionId: "approve" }, PERSON),
    );
    const other = await engine.submit({ tenant: "acme", text: "And when?", actor: PERSON, mode: "lazy" });
    await until("the plan", async () => (await rt.tasks.view(other.rootTaskId)) !== undefined);
    await answersOnlyOnceFlushed(() => engine.cancel(other.rootTaskId, PERSON, "no longer needed"));
    expect((await rt.tasks.view(other.rootTaskId))?.status).toBe("canceled");
  }, 60_000);

  it("an A2A SendMessage with returnImmediately (an ACK) answers only after the flush", async () => {
    const served = await serveA2a(engine);
    try {
      const client = await a2aClient(ada.key, served.url);
      const task = await answersOnlyOnceFlushed(() =>
        send(client, userMessage("Where is the offsite?"), true),
      );
      expect(task.id).toBeTruthy();
    } finally {
      await served.close();
    }
  }, 60_000);
});

describe("the HTTP API when Arbor cannot write", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await serveHttp({
      engine,
      keys: new ApiKeys({ keys: [ada.entry] }),
      unwritable: () => rt.unwritable(),
    });
  });
  afterAll(async () => {
    await server?.close();
  });
  const post = (text: string) =>
    fetch(`${server.url}/v1/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${ada.key}`, "content-type": "application/json" },
      body: JSON.stringify({ text, mode: "lazy" }),
    });

  it("answers 503 at once while another process holds the database's write lock, and /healthz stays quick", async () => {
    await rt.bus.idle();
    await rt.untilDurable();
    const other = new Database(join(dir, "data", "arbor.db"));
    other.exec("BEGIN IMMEDIATE"); // another process (a sqlite3 shell, say) writing
    try {
      const health = fetch(`${server.url}/healthz`).then((r) => ({ status: r.status, at: Date.now() }));
      const started = Date.now();
      const res = await post("Where is the offsite?");
      const answeredIn = Date.now() - started;
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UNAVAILABLE");
      // The old 5 s busy wait blocked the event loop: far below it, and /healthz answered meanwhile.
      expect(answeredIn).toBeLessThan(2500);
      const healthz = await health;
      expect(healthz.status).toBe(200);
      expect(other.inTransaction).toBe(true); // still held when both had answered
    } finally {
      other.exec("ROLLBACK");
      other.close();
    }
    // The lock gone, the same database takes writes again: the refusal poisoned nothing.
    expect((await post("Where is the offsite, now?")).status).toBe(202);
  }, 60_000);

  it("/healthz says 503 with the reason once a flush to disk failed, and so does every write", async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    disk.broken = true;
    const res = await post("Where is the offsite?");
    expect(res.status).toBe(503);
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(503);
    const body = (await health.json()) as { status: string; error: { message: string } };
    expect(body.status).toBe("unavailable");
    expect(body.error.message).toMatch(/flush to disk failed/);
    expect(body.error.message).not.toContain(dir); // anyone may ask: no paths
  }, 60_000);
});
