import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * `arbor tools ls [--namespace <ns>]` as a person uses it, in real processes: on the local data
 * folder, and through a running `arbor serve`'s HTTP API (`GET /v1/tools`) with any key of the
 * tenant; then the server restarted with another tools configuration, whose change shows in the
 * next listing.
 */
const FIRST = {
  tools: {
    sha256: { kind: "builtin", function: "sha256", namespace: "hashing" },
    md5: { kind: "builtin", function: "md5", namespace: "hashing" },
    word_count: { kind: "builtin", function: "word_count" },
  },
};
const SECOND = {
  tools: {
    sha256: { kind: "builtin", function: "sha256", namespace: "hashing" },
    word_count: { kind: "builtin", function: "word_count", namespace: "text" },
    calculator: { kind: "builtin", function: "calculator", namespace: "math" },
  },
};

let dir: string;
const file = (name: string) => join(dir, name);
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-tools-cli-"));
  await writeFile(file("tools.json"), JSON.stringify(FIRST));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const rows = (stdout: string) =>
  stdout
    .split("\n")
    .filter((l) => /^[a-z0-9_-]+\s+[a-z0-9_]+\s+builtin/.test(l))
    .map((l) => l.split(/\s+/).slice(0, 2).join(" "));

describe("arbor tools ls on the local data folder", () => {
  const env = () => arborEnv(file("data"), { ARBOR_TENANT: "acme", ARBOR_TOOLS_FILE: file("tools.json") });

  it("lists the tenant's tools, by namespace, and refuses a namespace that is not one", async () => {
    const all = await arborCli(["tools", "ls"], env());
    expect(all.code).toBe(0);
    expect(rows(all.stdout)).toEqual(["hashing md5", "hashing sha256", "builtin word_count"]);
    expect(all.stdout).toMatch(/3 tools, tenant acme in /);
    const hashing = await arborCli(["tools", "ls", "--namespace", "hashing"], env());
    expect(rows(hashing.stdout)).toEqual(["hashing md5", "hashing sha256"]);
    for (const bad of ["../hashing", "x".repeat(10_000)]) {
      const refused = await arborCli(["tools", "ls", "--namespace", bad], env());
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/is not a namespace: a namespace is 1-64 of a-z 0-9 _ -/);
    }
    // A description from elsewhere (an MCP server's, say) that would clear the screen, retitle the
    // window and reverse the line: shown as U+FFFD.
    await writeFile(
      file("hostile.json"),
      JSON.stringify({
        tools: {
          sha256: {
            kind: "builtin",
            function: "sha256",
            namespace: "hashing",
            description: "Hashes\u001b[2J\u001b]0;owned\u0007 text\u009b31m \u202eevil",
          },
        },
      }),
    );
    const hostile = await arborCli(
      ["tools", "ls"],
      arborEnv(file("data-hostile"), { ARBOR_TENANT: "acme", ARBOR_TOOLS_FILE: file("hostile.json") }),
    );
    expect(hostile.code).toBe(0);
    expect(hostile.stdout).toContain("Hashes\ufffd[2J\ufffd]0;owned\ufffd text\ufffd31m \ufffdevil");
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
    expect(hostile.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    const usage = await arborCli(["tools"], env());
    expect(usage.stderr).toMatch(/Usage: arbor tools ls \[--namespace <ns>\]/);
  }, 120_000);
});

describe("arbor tools ls through a running arbor serve", () => {
  let served: Served | undefined;
  let ada: string;
  let bea: string;
  const data = () => file("served");
  const serveEnv = () => arborEnv(data(), { ARBOR_TOOLS_FILE: file("tools.json") });
  const remote = (key: string) => arborEnv(file("cli"), { ARBOR_URL: served?.url ?? "", ARBOR_KEY: key });

  beforeAll(async () => {
    ada = await addKey(serveEnv(), "user_ada");
    bea = await addKey(serveEnv(), "user_bea", "beta");
    served = await startServe(serveEnv(), ["--example", "offsite"]);
  }, 60_000);
  afterAll(killAll);

  it("lists the key's tenant's tools through GET /v1/tools, for a key without roles", async () => {
    const listed = await arborCli(["tools", "ls", "--namespace", "hashing"], remote(ada));
    expect(listed.code).toBe(0);
    expect(rows(listed.stdout)).toEqual(["hashing md5", "hashing sha256"]);
    expect(listed.stdout).toContain(`2 tools in namespace hashing, tenant acme at ${served?.url}`);
    const beta = await arborCli(["tools", "ls"], remote(bea));
    expect(beta.stdout).toContain("tenant beta at");
    const refused = await arborCli(["tools", "ls", "--namespace", "../x"], remote(ada));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/a namespace is 1-64/);
  }, 120_000);

  it("a restart with another configuration: added, changed and removed tools show in the next listing", async () => {
    await served?.stop();
    await writeFile(file("tools.json"), JSON.stringify(SECOND));
    served = await startServe(serveEnv(), ["--example", "offsite"]);
    const listed = await arborCli(["tools", "ls"], remote(ada));
    expect(rows(listed.stdout)).toEqual(["math calculator", "hashing sha256", "text word_count"]);
    expect((await arborCli(["tools", "ls", "--namespace", "hashing"], remote(ada))).stdout).not.toContain(
      "md5",
    );
  }, 120_000);
});
