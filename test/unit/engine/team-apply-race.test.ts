import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Remote } from "../../../cli/lib/remote.ts";
import { teamApplyRemote } from "../../../cli/lib/team.ts";

/**
 * `arbor team apply` shows a diff, then applies: if another admin changes the team in between,
 * what is applied is not what the person confirmed. The CLI says so, shows what was really done,
 * and exits non-zero; it never reports the confirmed diff as applied.
 */
const URN = (id: string) => `cld:common.Tenant.acme/common.Assistant.${id}`;
const entry = (id: string) => ({ urn: URN(id), name: id });
const shown = { added: [entry("writer")], changed: [], removed: [], unchanged: [entry("generalist")] };
// Meanwhile another admin added "spy": applying the file now also retires it.
const done = {
  added: [entry("writer")],
  changed: [],
  removed: [entry("spy")],
  unchanged: [entry("generalist")],
};

let dir: string;
let file: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-team-race-"));
  file = join(dir, "team.json");
  await writeFile(file, JSON.stringify({ assistants: [{ name: "Writer", id: "writer", purpose: "Write" }] }));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const server = (applied: typeof done) =>
  (async (input: string | URL | Request) => {
    const diff = String(input).includes("dryRun=true") ? shown : applied;
    return new Response(JSON.stringify({ tenant: "acme", diff, applied: true }), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  }) as typeof fetch;

describe("arbor team apply when the team changes between the diff and the apply", () => {
  it("says the apply did something else, shows it, and exits 1", async () => {
    const remote = new Remote({ url: "http://127.0.0.1:1", key: "k".repeat(20) }, { fetch: server(done) });
    const lines: string[] = [];
    const code = await teamApplyRemote(remote, { file, yes: true, dryRun: false }, (l) => lines.push(l));
    const text = lines.join("\n");
    expect(code).toBe(1);
    expect(text).toMatch(/team changed after the diff above was shown/);
    expect(text).toMatch(/- spy/);
    expect(text).not.toMatch(/^Applied:/m);
  });

  it("reports the apply as usual when it did what was shown", async () => {
    const remote = new Remote({ url: "http://127.0.0.1:1", key: "k".repeat(20) }, { fetch: server(shown) });
    const lines: string[] = [];
    expect(await teamApplyRemote(remote, { file, yes: true, dryRun: false }, (l) => lines.push(l))).toBe(0);
    expect(lines.join("\n")).toMatch(/^Applied: 1 added, 0 changed, 0 retired\./m);
  });
});
