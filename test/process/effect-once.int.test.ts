import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { REQUEST, script } from "../../examples/offsite/scenario.ts";
import { ScriptedLlm } from "../../shared/adapters/llm/scripted-llm.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { parentUrn } from "../../shared/domain/urn.ts";
import type { Engine } from "../../shared/engine/engine.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { PERSON } from "../scenarios/engine-harness.ts";
import { LOOPBACK_ALLOWED } from "../scenarios/tool-world.ts";
import { addKey, killAll, killHard, startServe } from "../support/arbor-process.ts";
import { until } from "../support/until.ts";

/**
 * An approval covers one execution. `arbor serve --example offsite` with `send_email` bound to a
 * slow HTTP endpoint (risky): the person approves, the endpoint holds the POST, and the server is
 * killed (SIGKILL) while it waits. A new process on the same data folder re-drives the work: it
 * must not send the email again on the old approval. It asks the person again, saying that the
 * first attempt's outcome is unknown and what the tool got; only the new approval sends it, with
 * the same Idempotency-Key. The audit log keeps both attempts.
 */
const CALLER = { actor: PERSON, caller: { tenant: "acme", roles: ["admin"] } };

interface Post {
  headers: IncomingHttpHeaders;
  body: string;
}

let dir: string;
let server: Server;
let base: string;
const posts: Post[] = [];
/** Answers the endpoint holds back (the first POST waits until the test is over). */
const held: ServerResponse[] = [];
let answerNow = false;
let rt: LocalRuntime | undefined;
let engine: Engine | undefined;
let stopSteps: (() => void) | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-once-"));
  posts.length = 0;
  answerNow = false;
  server = createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    posts.push({ headers: req.headers, body });
    if (answerNow) res.writeHead(200, { "content-type": "application/json" }).end('{"sent":true}');
    else held.push(res); // a slow mail service: no answer yet
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await killAll();
  stopSteps?.();
  await engine?.close();
  await rt?.close();
  engine = undefined;
  rt = undefined;
  for (const res of held.splice(0)) res.destroy();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

const env = (extra: Record<string, string> = {}) => ({
  ...process.env,
  ARBOR_DATA_DIR: join(dir, "data"),
  ARBOR_TENANT: "acme",
  ARBOR_TOOLS_FILE: join(dir, "tools.json"),
  // The email endpoint listens on 127.0.0.1: the operator lets Arbor reach it (the outbound guard).
  ARBOR_OUTBOUND_ALLOW: "127.0.0.1",
  ARBOR_OUTBOUND_PORTS: "1024-65535",
  POWERTOOLS_LOG_LEVEL: "SILENT",
  ...extra,
});

describe("a risky call in flight at kill -9", () => {
  it("is not repeated on the old approval: the person is asked again, told the outcome is unknown", async () => {
    await writeFile(
      join(dir, "tools.json"),
      JSON.stringify({
        tools: {
          send_email: {
            kind: "http",
            url: `${base}/send`,
            method: "POST",
            risky: true,
            timeoutMs: 300_000,
            description: "Send an email",
            parameters: {
              type: "object",
              properties: { to: { type: "string" }, subject: { type: "string" }, body: { type: "string" } },
              required: ["to", "subject", "body"],
            },
          },
        },
      }),
    );
    const key = await addKey(env(), "user_ada", "acme", ["admin"]);
    const auth = { authorization: `Bearer ${key}`, "content-type": "application/json" };

    // 1. The first process: the request, its approval, and the email in flight.
    const served = await startServe(env(), ["--example", "offsite"]);
    const { url } = served;
    const submitted = await fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ text: REQUEST }),
    });
    expect(submitted.status).toBe(202);
    const { rootTaskId } = (await submitted.json()) as { rootTaskId: string };
    const pendingOver = async () => {
      const r = await fetch(`${url}/v1/tasks/${encodeURIComponent(rootTaskId)}/interactions`, {
        headers: auth,
      });
      const { interactions } = (await r.json()) as { interactions: { urn: string; purpose: string }[] };
      return interactions.find((i) => i.purpose === "confirm_risky_action");
    };
    const ask = await until("the approval request", pendingOver);
    const answered = await fetch(`${url}/v1/interactions/${encodeURIComponent(ask.urn)}/answer`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ selectedOptionId: "approve" }),
    });
    expect(answered.status).toBe(204);
    await until("the email's POST", async () => (posts.length > 0 ? true : undefined));
    const first = posts[0] as Post;
    const idempotencyKey = first.headers["idempotency-key"];
    expect(idempotencyKey).toMatch(/^arbor-[A-Za-z0-9_-]{32}$/);
    expect(first.headers["arbor-attempt"]).toBe("1");
    expect(JSON.parse(first.body)).toMatchObject({ to: "team@example.com" });

    // 2. Killed while the endpoint holds the request: the outcome of the email is unknown.
    await killHard(served);

    // 3. A new server on the same data folder (it takes the folder's lock, as `arbor serve` does, so
    // the claims the killed one held are its to take over at once); its watchdog re-drives
    // everything that stopped.
    answerNow = true;
    rt = createLocalRuntime(
      { mode: "local", tenant: "acme", dataDir: join(dir, "data"), durable: true },
      { lockAs: "arbor serve" },
    );
    engine = await createLocalEngine(rt, {
      llm: new ScriptedLlm(script),
      toolsConfig: JSON.parse(await readFile(join(dir, "tools.json"), "utf8")),
      outbound: LOOPBACK_ALLOWED,
    });
    stopSteps = engine.start();
    const live = engine;
    await live.watchdog(0);
    const again = await until("the new approval request", async () => {
      await rt?.bus.idle();
      const pending = (await live.pendingInteractions(rootTaskId, CALLER)) ?? [];
      return pending.find((i) => i.purpose === "confirm_risky_action");
    });
    // Nothing was sent again on the old approval.
    expect(posts).toHaveLength(1);
    expect(again.meta.id).not.toBe(ask.urn);
    expect(again.meta.name).toMatch(/-attempt-2$/);
    expect(again.display.title).toMatch(/outcome of attempt 1 is unknown/);
    expect(again.display.description).toMatch(/outcome of attempt 1 of send_email is unknown/);
    expect(again.display.description).toContain(idempotencyKey as string);
    expect(again.display.content).toMatchObject({
      arguments: { to: "team@example.com" },
      idempotencyKey,
      attempt: 2,
      earlier: { attempt: 1, outcome: "unknown" },
    });
    expect((await live.deps.tasks.view(parentOf(again)))?.status).toBe("awaiting_user");

    // 4. Approved again: the second attempt goes out, with the same key, and the request finishes.
    await live.respond(again.meta.id, { selectedOptionId: "approve" }, PERSON);
    const done = await until("the request to finish", async () => {
      await rt?.bus.idle();
      const { view } = await live.result(rootTaskId);
      if (view?.status === "awaiting_user") {
        // Other questions of the run (none expected) would be answered here.
        for (const p of (await live.pendingInteractions(rootTaskId, CALLER)) ?? [])
          await live.respond(p.meta.id, { selectedOptionId: "approve" }, PERSON);
      }
      if (view && ["done", "failed", "canceled"].includes(view.status)) return view;
      await live.watchdog(5_000);
      return undefined;
    });
    expect(done.status).toBe("done");
    expect(posts).toHaveLength(2);
    expect(posts[1]?.headers["idempotency-key"]).toBe(idempotencyKey);
    expect(posts[1]?.headers["arbor-attempt"]).toBe("2");
    expect(posts[1]?.body).toBe(first.body);
    const audit = await rt.audit.forTask(parentOf(again));
    expect(audit.map((r) => `${r.tool}:${r.stage}:${r.attempt ?? 1}`)).toEqual([
      "send_email:requested:1",
      "send_email:requested:2",
      "send_email:completed:2",
    ]);
  }, 240_000);
});

/** The task an interaction belongs to. */
const parentOf = (i: InteractionResource) => parentUrn(i.meta.id) as string;
