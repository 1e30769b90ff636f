import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborEnv, killAll, killHard, startServe } from "../support/arbor-process.ts";

/**
 * Console sessions across `arbor serve`'s life: a session is a record in the data folder, on disk
 * before the sign-in answers, so a server killed with SIGKILL and started again knows it (and a
 * sign-out before the kill stays a sign-out). What a browser does is plain HTTP here.
 */
let dir: string;
let env: NodeJS.ProcessEnv;
let key: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-console-sessions-"));
  env = arborEnv(join(dir, "data"));
  key = await addKey(env, "user_ada", "acme", ["admin"]);
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

async function signIn(url: string): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${url}/console/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ key, next: "/console" }).toString(),
    redirect: "manual",
  });
  expect(res.status).toBe(303);
  const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const page = await (await fetch(`${url}/console`, { headers: { cookie }, redirect: "manual" })).text();
  return { cookie, csrf: /name="arbor-csrf" content="([^"]+)"/.exec(page)?.[1] ?? "" };
}

const status = async (url: string, cookie: string) =>
  (await fetch(`${url}/console`, { headers: { cookie }, redirect: "manual" })).status;

describe("console sessions and a killed server", () => {
  it("keep a session signed in across kill -9, and a sign-out signed out", async () => {
    const first = await startServe(env, ["--example", "offsite"]);
    const kept = await signIn(first.url);
    const ended = await signIn(first.url);
    const out = await fetch(`${first.url}/console/logout`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: ended.cookie },
      body: new URLSearchParams({ csrf: ended.csrf }).toString(),
      redirect: "manual",
    });
    expect(out.status).toBe(303);
    await killHard(first);

    const second = await startServe(env, ["--example", "offsite"]);
    expect(await status(second.url, kept.cookie)).toBe(200);
    expect(await status(second.url, ended.cookie)).toBe(303);
    // The session still changes things only with its CSRF token.
    const sent = await fetch(`${second.url}/v1/messages`, {
      method: "POST",
      headers: { cookie: kept.cookie, "x-arbor-csrf": kept.csrf, "content-type": "application/json" },
      body: JSON.stringify({ text: "After the restart" }),
    });
    expect(sent.status).toBe(202);
  }, 120_000);
});
