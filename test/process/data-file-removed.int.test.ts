import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * The database file deleted under a running `arbor serve` (an operator cleaning up, a script with
 * the wrong folder). SQLite keeps writing to the open, unlinked file: every write succeeds and is
 * gone at the next start. A 202 must mean the request survives a restart, so the server must
 * notice: writes are refused (503) and /healthz says why, instead of 202 and "ok".
 */
let dir: string;
let served: Served | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-db-removed-"));
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("the database file deleted while serving", () => {
  it("answers no more 202s, and /healthz says 503 naming why", async () => {
    const env = arborEnv(join(dir, "data"), { POWERTOOLS_LOG_LEVEL: "SILENT" });
    const key = await addKey(env, "user_ada");
    served = await startServe(env, ["--example", "offsite"]);
    const post = () =>
      fetch(`${served?.url}/v1/messages`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ text: "Where is the offsite?", mode: "lazy" }),
      });
    expect((await post()).status).toBe(202);
    expect((await fetch(`${served.url}/healthz`)).status).toBe(200);

    rmSync(join(dir, "data", "arbor.db"));

    const refused = await post();
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).not.toBeNull();
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /database file was deleted or replaced/,
    );
    const health = await fetch(`${served.url}/healthz`);
    expect(health.status).toBe(503);
    expect(((await health.json()) as { error: { message: string } }).error.message).toMatch(
      /database file was deleted or replaced while Arbor was running/,
    );
  }, 120_000);
});
