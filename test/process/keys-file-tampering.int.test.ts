import { execFileSync } from "node:child_process";
import { hash } from "node:crypto";
import { chmodSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * The keys file of a running `arbor serve` swapped for something that is not a keys file: a
 * symlink to a FIFO or to /dev/zero (whose read never ends), or to a file any local user may
 * write. The server must not hang on it (it reads the file on its only thread) and must not trust
 * it: every /v1 call is 503 saying why, /healthz answers at once, and the real file, put back,
 * lets its keys in again. A real child process; the server polls the file every second.
 */
let dir: string;
let served: Served | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-keys-tamper-"));
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** A response within `ms`, or "no answer" (a server whose thread is blocked answers nothing). */
async function within(ms: number, url: string, key?: string) {
  try {
    const r = await fetch(url, {
      signal: AbortSignal.timeout(ms),
      ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}),
    });
    return { status: r.status, text: await r.text() };
  } catch {
    return { status: 0, text: "no answer" };
  }
}

/** Polls until the API answers `status` (and says `says`) for `key`: the file is read again every second. */
async function untilStatus(url: string, key: string, status: number, says = /./) {
  const end = Date.now() + 60_000;
  let last = { status: 0, text: "" };
  while (Date.now() < end) {
    last = await within(10_000, `${url}/v1/tasks/x`, key);
    if (last.status === status && says.test(last.text)) return last;
    await sleep(250);
  }
  return last;
}

describe("the keys file replaced while serving by what is not a keys file", () => {
  it("neither blocks the server nor lets anyone in; the real file put back works again", async () => {
    const env = arborEnv(join(dir, "data"), { POWERTOOLS_LOG_LEVEL: "SILENT" });
    const key = await addKey(env, "user_ada");
    const file = join(dir, "data", "api-keys.json");
    served = await startServe(env, ["--example", "offsite"]);
    const { url } = served;
    expect((await untilStatus(url, key, 404)).status).toBe(404); // the key works: no such task

    const kept = join(dir, "kept.json");
    renameSync(file, kept);
    const fifo = join(dir, "keys.fifo");
    execFileSync("mkfifo", [fifo]);
    // A file anyone may write, holding a key its writer chose.
    const intruder = "arbor_intruder_key_0123456789abcdef";
    const open = join(dir, "open.json");
    writeFileSync(
      open,
      JSON.stringify({
        keys: [
          {
            id: "user_mallory",
            kind: "human",
            tenant: "default",
            roles: ["admin"],
            sha256: hash("sha256", intruder),
          },
          ...JSON.parse(readFileSync(kept, "utf8")).keys,
        ],
      }),
    );
    chmodSync(open, 0o666);

    for (const [target, why] of [
      [fifo, /not a regular file/],
      ["/dev/zero", /not a regular file/],
      [open, /any local user may write it/],
    ] as const) {
      rmSync(file, { force: true });
      symlinkSync(target, file);
      const refused = await untilStatus(url, key, 503, why);
      expect([target, refused.status]).toEqual([target, 503]);
      expect(refused.text).toMatch(why);
      expect((await within(5_000, `${url}/v1/tasks/x`, intruder)).status).toBe(503);
      expect((await within(5_000, `${url}/healthz`)).status).toBe(200);
    }

    rmSync(file);
    renameSync(kept, file);
    expect((await untilStatus(url, key, 404)).status).toBe(404);
    expect((await within(5_000, `${url}/v1/tasks/x`, intruder)).status).toBe(401);
  }, 240_000);
});
