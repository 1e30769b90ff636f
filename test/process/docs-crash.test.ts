import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborEnv, killAll, startServe } from "../support/arbor-process.ts";
import { fetchApi } from "../support/http.ts";

/**
 * `arbor serve` killed with SIGKILL while it reads a document it accepted: started again, it takes
 * the document up at once (its lock says the run it finds was left by a process that is gone), and
 * the document ends ready with each chunk once. Real child processes on one data folder.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let key: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-docs-crash-"));
  env = arborEnv(join(dir, "data"));
  key = await addKey(env, "user_root", "local", ["admin"]);
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** A Markdown document of `sections` sections, each a chunk of its own. */
const big = (sections: number) =>
  Array.from(
    { length: sections },
    (_, i) => `## Section ${i}\n\nSection ${i} holds fact ${i * 13} about the offsite's budget and venue.`,
  ).join("\n\n");

type State = { status: string; chunks?: number; embedded?: number; attempts?: number };

describe("arbor serve killed with SIGKILL while it reads a document", () => {
  it("takes it up again at its restart, and it ends ready with every chunk once", async () => {
    const first = await startServe(env, ["--example", "offsite"]);
    const res = await fetch(`${first.url}/v1/documents?name=budget.md`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "text/markdown" },
      body: big(1500),
    });
    expect(res.status).toBe(202);
    const { urn } = (await res.json()) as { urn: string };
    const path = `/v1/documents/${encodeURIComponent(urn)}`;
    // Killed once it has begun (or at once, if it is quick): never after it is ready.
    for (let i = 0; i < 50; i++) {
      const state = (await fetchApi<State>(first.url, "GET", path, key)).json;
      if (state.status !== "pending") break;
      await sleep(10);
    }
    const atKill = (await fetchApi<State>(first.url, "GET", path, key)).json;
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await startServe(env, ["--example", "offsite"]);
    let state: State = { status: "" };
    for (const until = Date.now() + 60_000; Date.now() < until; await sleep(200)) {
      state = (await fetchApi<State>(second.url, "GET", path, key)).json;
      if (state.status === "ready" || state.status === "failed") break;
    }
    expect(state).toMatchObject({ status: "ready", chunks: 1500 });
    // Killed mid-way, it was run twice: once cut short, once to the end (no third run waited for).
    expect(state.attempts).toBe(atKill.status === "processing" ? 2 : 1);
    expect(state).not.toHaveProperty("holder");
    await second.stop();
  }, 180_000);
});
