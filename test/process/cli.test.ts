import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { arborCli } from "../support/arbor-process.ts";

/** The `arbor` command as a person runs it: a real process, a fresh data folder. */
let dataDir: string;
const arbor = (...args: string[]) =>
  arborCli(args, { ...process.env, ARBOR_DATA_DIR: dataDir, NO_COLOR: "1" });

describe("arbor CLI", () => {
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "arbor-cli-"));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it("demo builds a depth-3 tree, completes it through the bus, and replays the log to the same views", async () => {
    const { code, stdout, stderr } = await arbor("demo");
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(stdout).toMatch(/Wrote 10 resources/);
    expect(stdout).toMatch(/the log holds 7 TaskCompleted for 7 tasks/);
    expect(stdout).toMatch(/7 task views rebuilt, 7 of 7 identical/);
    // The tree: the root, two parents one level down, four leaves two levels down, all done.
    const tree = stdout.split("\n").filter((l) => l.includes("[done]"));
    expect(tree[0]).toBe("✓ Plan the offsite [done]");
    expect(tree.filter((l) => /^[├└]─ ✓ (Agenda|Logistics) \[done\]$/.test(l))).toHaveLength(2);
    expect(
      tree.filter((l) =>
        /^[│ ] {2}[├└]─ ✓ (Shortlist venues|Book travel|Draft sessions|Plan a team dinner) \[done\]$/.test(l),
      ),
    ).toHaveLength(4);
  }, 60_000);

  it("ls, get, events and replay read what the demo left", async () => {
    const ls = await arbor("ls", "--all");
    expect(ls.code).toBe(0);
    expect(ls.stdout.match(/^plan\.Task /gm)).toHaveLength(7);
    const rootUrn = /(cld:\S+\/plan\.Task\.[0-9a-f]+)$/m.exec(
      ls.stdout.split("\n").find((l) => l.includes("Plan the offsite")) ?? "",
    )?.[1];
    expect(rootUrn).toBeDefined();
    const get = await arbor("get", rootUrn as string);
    expect(JSON.parse(get.stdout)).toMatchObject({
      meta: { id: rootUrn, name: "Plan the offsite", type: "plan.Task" },
    });
    const events = await arbor("events", rootUrn as string);
    expect(
      events.stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => l.trim().split(/\s+/)[2]),
    ).toEqual(["TaskCreated", "TaskStarted", "TaskCompleted"]);
    // The global log: every stream's events in commit order, a page at a time.
    const all = await arbor("events", "--all", "--max", "1000");
    const lines = all.stdout.split("\n").filter(Boolean);
    expect(lines.filter((l) => / TaskCompleted /.test(l))).toHaveLength(7);
    const positions = lines.map((l) => l.split(" ")[0] as string);
    expect([...positions].sort()).toEqual(positions);
    const firstTwo = await arbor("events", "--all", "--max", "2");
    expect(firstTwo.stdout.split("\n").filter(Boolean)).toEqual([
      ...lines.slice(0, 2),
      `# more: arbor events --all --from ${positions[1]}`,
    ]);
    const onFrom = await arbor("events", "--all", "--from", positions[1] as string, "--max", "1");
    expect(onFrom.stdout.split("\n")[0]).toBe(lines[2]);
    const badFrom = await arbor("events", "--all", "--from", "nowhere");
    expect([badFrom.code, badFrom.stderr]).toEqual([
      1,
      expect.stringMatching(/Invalid log position "nowhere"/),
    ]);
    const replay = await arbor("replay");
    expect(replay.stdout).toMatch(/7 task views rebuilt, 0 differ/);
  }, 60_000);

  it("says what went wrong and exits 1 on bad input", async () => {
    const badUrn = await arbor("ls", "not-a-urn");
    expect(badUrn.code).toBe(1);
    expect(badUrn.stderr).toMatch(/Invalid URN "not-a-urn": must start with "cld:" \[INVALID_URN\]/);
    const missing = await arbor("get", "cld:common.Tenant.local/common.Conversation.nope");
    expect(missing.stderr).toMatch(/No resource .* arbor ls --all/);
    const unknown = await arbor("fly");
    expect(unknown.stderr).toMatch(/Unknown command "fly". Run: arbor help/);
    const settings = await arborCli(["ls"], { ...process.env, ARBOR_DURABLE: "maybe" });
    expect(settings.stderr).toMatch(/ARBOR_DURABLE/);
  }, 60_000);
});
