import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * `arbor replay` beside a running `arbor serve` that is busy (the docs say the read commands work
 * beside it): tasks written between its reads are no difference, so it exits 0 while requests
 * run, not 1 with "1 differ" now and then.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let served: Served;
let key: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-attack-replay-"));
  env = arborEnv(join(dir, "data"));
  key = await addKey(env, "user_ada");
  served = await startServe(env, ["--example", "offsite"]);
}, 60_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("arbor replay beside a busy arbor serve", () => {
  it("finds no difference while requests run", async () => {
    let sending = true;
    const traffic = (async () => {
      for (let i = 0; sending && i < 200; i++) {
        await fetch(`${served.url}/v1/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ text: `What is ${i} plus 7?` }),
        });
        await sleep(50);
      }
    })();
    try {
      for (let i = 0; i < 6; i++) {
        const run = await arborCli(["replay"], env);
        expect(run.stdout, run.stderr).toMatch(/ 0 differ from the stored views/);
        expect(run.code).toBe(0);
      }
    } finally {
      sending = false;
      await traffic;
    }
  }, 180_000);
});
