import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * `arbor team apply <file>` and `arbor team show` as a person uses them, in real processes: on the
 * local data folder (the change shown, asked for, applied; applied again: nothing; a bad file
 * refused naming the field), and, while an `arbor serve` holds the folder, through its HTTP API
 * with an admin's key (a non-admin's is refused).
 */
const TEAM = {
  assistants: [
    { name: "Writer", id: "writer", purpose: "Write and edit texts", tools: ["word_count"] },
    { name: "Analyst", id: "analyst", purpose: "Work with numbers", tools: ["calculator"] },
  ],
};
const NEXT = {
  assistants: [
    { name: "Writer", id: "writer", purpose: "Write, edit and proofread texts", tools: ["word_count"] },
  ],
};
const BAD = { assistants: [{ name: "Fetcher", purpose: "Fetch pages", tools: ["fetch_page"] }] };

let dir: string;
const file = (name: string) => join(dir, name);
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-team-cli-"));
  await writeFile(file("team.json"), JSON.stringify(TEAM));
  await writeFile(file("next.json"), JSON.stringify(NEXT));
  await writeFile(file("bad.json"), JSON.stringify(BAD));
  await writeFile(file("broken.json"), "{ assistants: ");
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("arbor team on the local data folder", () => {
  const env = () => arborEnv(file("data"), { ARBOR_TENANT: "acme" });

  it("shows the change, applies it only when told to, and applying it again changes nothing", async () => {
    const asked = await arborCli(["team", "apply", file("team.json")], env());
    expect(asked.stdout).toMatch(/\+ Writer\s+added\s+cld:common\.Tenant\.acme\/common\.Assistant\.writer/);
    expect(asked.stdout).toMatch(/2 to add, 0 to change, 0 to remove, 0 unchanged/);
    expect(asked.stdout).toMatch(/Not applied: nobody at a terminal to confirm it\. Pass --yes/);
    expect(asked.code).toBe(2);
    const dry = await arborCli(["team", "apply", file("team.json"), "--dry-run"], env());
    expect(dry.stdout).toMatch(/Dry run: nothing was applied/);
    expect((await arborCli(["team", "show"], env())).stdout).toMatch(/Tenant acme has no team yet/);

    const applied = await arborCli(["team", "apply", file("team.json"), "--yes"], env());
    expect(applied.stdout).toMatch(/Applied: 2 added, 0 changed, 0 retired\./);
    expect(applied.code).toBe(0);
    const again = await arborCli(["team", "apply", file("team.json"), "--yes"], env());
    expect(again.stdout).toMatch(/= Writer\s+unchanged/);
    expect(again.stdout).toMatch(/Nothing to change\./);

    const next = await arborCli(["team", "apply", file("next.json"), "--yes"], env());
    expect(next.stdout).toMatch(/~ Writer\s+changed purpose/);
    expect(next.stdout).toMatch(/- Analyst\s+removed \(retired: no longer elected/);
    expect(next.stdout).toMatch(/Applied: 0 added, 1 changed, 1 retired\./);
    const shown = await arborCli(["team", "show"], env());
    expect(JSON.parse(shown.stdout)).toEqual({ assistants: [{ ...NEXT.assistants[0] }] });
  }, 180_000);

  it("refuses a bad file, naming the file and the field, and changes nothing", async () => {
    const before = (await arborCli(["team", "show"], env())).stdout;
    const bad = await arborCli(["team", "apply", file("bad.json"), "--yes"], env());
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(`${file("bad.json")} was refused, nothing was applied.`);
    expect(bad.stderr).toMatch(
      /assistants\.0\.tools\.0: unknown tool "fetch_page"; the tool registry has [a-z_, ]*\bcalculator\b/,
    );
    const broken = await arborCli(["team", "apply", file("broken.json"), "--yes"], env());
    expect(broken.stderr).toMatch(/broken\.json is not JSON/);
    const missing = await arborCli(["team", "apply", file("none.json"), "--yes"], env());
    expect(missing.stderr).toMatch(/none\.json cannot be read/);
    expect((await arborCli(["team", "show"], env())).stdout).toBe(before);
  }, 120_000);
});

describe("arbor team through a running arbor serve", () => {
  let served: Served;
  let admin: string;
  let ada: string;
  const data = () => file("served");
  beforeAll(async () => {
    const env = arborEnv(data());
    admin = await addKey(env, "user_root", "acme", ["admin"]);
    ada = await addKey(env, "user_ada");
    served = await startServe(env, ["--example", "offsite"]);
  }, 60_000);
  afterAll(killAll);

  it("says, on the folder the server holds, to go through the server", async () => {
    const locked = await arborCli(["team", "apply", file("team.json"), "--yes"], arborEnv(data()));
    expect(locked.code).toBe(1);
    expect(locked.stderr).toMatch(/is in use by process \d+ \(arbor serve/);
    expect(locked.stderr).toMatch(/ARBOR_URL=<its URL.*ARBOR_KEY=<an admin key of local> arbor team apply/);
  }, 60_000);

  it("applies with an admin's key through the API: the change shown, applied, then nothing", async () => {
    const remote = arborEnv(file("cli"), { ARBOR_URL: served.url, ARBOR_KEY: admin });
    const dry = await arborCli(["team", "apply", file("team.json"), "--dry-run"], remote);
    expect(dry.stdout).toContain(`Team of Arbor at ${served.url}`);
    expect(dry.stdout).toMatch(/\+ Writer\s+added/);
    const applied = await arborCli(["team", "apply", file("team.json"), "--yes"], remote);
    expect(applied.stdout).toMatch(/Applied: 2 added/);
    const again = await arborCli(["team", "apply", file("team.json"), "--yes"], remote);
    expect(again.stdout).toMatch(/Nothing to change\./);
    const shown = await arborCli(["team", "show"], remote);
    const ids = (JSON.parse(shown.stdout) as typeof TEAM).assistants.map((a) => a.id);
    expect(ids).toEqual(expect.arrayContaining(["writer", "analyst"]));

    const bad = await arborCli(["team", "apply", file("bad.json"), "--yes"], remote);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /bad\.json was refused, nothing was applied\..*assistants\.0\.tools\.0: unknown tool "fetch_page"/,
    );
  }, 120_000);

  it("refuses a person who is not an admin (403), and changes nothing", async () => {
    const remote = arborEnv(file("cli"), { ARBOR_URL: served.url, ARBOR_KEY: ada });
    const refused = await arborCli(["team", "apply", file("next.json"), "--yes"], remote);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Not allowed \(403\)/);
    expect((await arborCli(["team", "show"], remote)).stderr).toMatch(/Not allowed \(403\)/);
    const asAdmin = arborEnv(file("cli"), { ARBOR_URL: served.url, ARBOR_KEY: admin });
    expect((await arborCli(["team", "apply", file("team.json"), "--dry-run"], asAdmin)).stdout).toMatch(
      /Nothing to change\./,
    );
  }, 120_000);
});
