import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Task } from "@a2a-js/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parentUrn } from "../../shared/domain/urn.ts";
import { planMarkerKey } from "../../shared/engine/context.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { a2aClient, rootOf, send, userMessage } from "../scenarios/a2a-fixtures.ts";
import { addKey, arborEnv, killAll, killHard, startServe } from "../support/arbor-process.ts";
import { fetchApi } from "../support/http.ts";

/**
 * `arbor serve` killed with SIGKILL right after it answered: what it acknowledged is on disk, and
 * the work the kill interrupted carries on as soon as it is started again (not ten minutes later,
 * when the watchdog would find it stale). Real child processes on one data folder, restarted many
 * times; the scripted offsite example as the model.
 */
const KILLS = 12;
const A2A_KILLS = 6;

let dir: string;
let env: NodeJS.ProcessEnv;
let key: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-crash-"));
  env = arborEnv(join(dir, "data"));
  key = await addKey(env, "user_ada");
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const serve = () => startServe(env, ["--example", "offsite"]);

const get = (url: string, path: string) =>
  fetchApi<{ task?: { status: string }; interactions?: unknown[] }>(url, "GET", path, key);
const taskPath = (urn: string) => `/v1/tasks/${encodeURIComponent(urn)}`;

/**
 * The request went on after the restart: it ended, or reached the question the offsite plan asks.
 * (Its root task exists once it is planned: 404 until then.)
 */
async function untilMoved(url: string, rootTaskId: string, deadline: number): Promise<boolean> {
  while (Date.now() < deadline) {
    const task = await get(url, taskPath(rootTaskId));
    expect([200, 404]).toContain(task.status);
    const status = task.json.task?.status ?? "";
    if (["done", "failed", "canceled", "awaiting_user"].includes(status)) return true;
    const asked = await get(url, `${taskPath(rootTaskId)}/interactions`);
    if ((asked.json.interactions?.length ?? 0) > 0) return true;
    await sleep(200);
  }
  return false;
}

describe("arbor serve killed with SIGKILL right after it answered", () => {
  it("keeps every request it answered 202 (or ACKed over A2A), and carries each on within seconds of the restart", async () => {
    const accepted: string[] = [];
    for (let i = 0; i < KILLS; i++) {
      const s = await serve();
      const res = await fetch(`${s.url}/v1/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ text: `Plan the offsite, take ${i}` }),
      });
      const body = (await res.json()) as { rootTaskId: string };
      s.child.kill("SIGKILL"); // at once: the 202 is all the caller has
      expect(res.status).toBe(202);
      accepted.push(body.rootTaskId);
      await s.exited;
    }
    const acked: Task[] = [];
    for (let i = 0; i < A2A_KILLS; i++) {
      const s = await serve();
      const task = await send(await a2aClient(key, s.url), userMessage(`Plan the offsite, agent ${i}`), true);
      s.child.kill("SIGKILL");
      acked.push(task);
      await s.exited;
    }

    // On disk, as the killed processes left it: every acknowledged message, and its root task or
    // the mark that it still has to be planned (read before anything runs again).
    const disk = createLocalRuntime({
      mode: "local",
      tenant: "acme",
      dataDir: join(dir, "data"),
      durable: true,
    });
    try {
      for (const rootTaskId of [...accepted, ...acked.map(rootOf)]) {
        const messageUrn = parentUrn(rootTaskId) as string;
        expect([messageUrn, (await disk.resources.get(messageUrn))?.meta.type]).toEqual([
          messageUrn,
          "common.Message",
        ]);
        const planned = (await disk.tasks.view(rootTaskId)) !== undefined;
        const toPlan = (await disk.state.get(planMarkerKey(messageUrn)))?.status === "requested";
        expect([rootTaskId, planned || toPlan]).toEqual([rootTaskId, true]);
      }
    } finally {
      await disk.close();
    }

    const s = await serve();
    const restarted = Date.now();
    const agent = await a2aClient(key, s.url);
    for (const task of acked) {
      const found = await agent.getTask({ tenant: "", id: task.id, historyLength: undefined });
      expect(found.id).toBe(task.id);
    }
    // Far below the watchdog's 600 s: what the kills interrupted is driven again at start-up.
    const deadline = restarted + 60_000;
    for (const rootTaskId of [...accepted, ...acked.map(rootOf)])
      expect(await untilMoved(s.url, rootTaskId, deadline)).toBe(true);
    await killHard(s);
  }, 300_000);
});
