import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUEST } from "../../examples/offsite/scenario.ts";
import { addKey, arborCli, arborEnv, killAll, type Served, startServe } from "../support/arbor-process.ts";

/**
 * The CLI against a remote Arbor (ARBOR_URL, ARBOR_KEY): a real `arbor serve` in one process, the
 * CLI in others with their own (empty) data folder, so everything goes through the HTTP API. A
 * lazy request is run with the live tree drawn and the plan's approval and the risky call's
 * confirmation answered on stdin; then ls, get and events read what it left.
 */
let serverDir: string;
let cliDir: string;
let served: Served;
let key: string;

const arbor = (args: string[], stdin: string, env: Record<string, string>) =>
  arborCli(args, arborEnv(cliDir, env), stdin);
const remote = () => ({ ARBOR_URL: served.url, ARBOR_KEY: key });

beforeAll(async () => {
  serverDir = await mkdtemp(join(tmpdir(), "arbor-remote-server-"));
  cliDir = await mkdtemp(join(tmpdir(), "arbor-remote-cli-"));
  const env = arborEnv(serverDir);
  key = await addKey(env, "user_ada");
  served = await startServe(env, ["--example", "offsite"]);
}, 60_000);
afterAll(async () => {
  await killAll();
  await rm(serverDir, { recursive: true, force: true });
  await rm(cliDir, { recursive: true, force: true });
});

describe("arbor run, ls, get, events with ARBOR_URL", () => {
  let rootTaskId = "";

  it("runs a lazy request remotely: the tree live, the plan and the risky call answered here, the answer", async () => {
    const { code, stdout: out, stderr: err } = await arbor(["run", "--lazy", REQUEST], "1\n2\n1\n", remote());
    expect(err).toBe("");
    expect(out).toContain(`Arbor at ${served.url}`);
    expect(out).toMatch(/\? Approve the plan|\? .*plan/i);
    expect(out).toMatch(/\? Allow send_email\?/);
    expect(out).toMatch(/✓ Shortlist venues: done/);
    expect(out).toMatch(/✓ Plan the offsite \[done\] event-planner \d\.\d\d, \d+ tok/);
    expect(out).toMatch(/^Answer$/m);
    expect(code).toBe(0);
    rootTaskId = /Inspect: arbor events (\S+)/.exec(out)?.[1] ?? "";
    expect(rootTaskId).toMatch(/^cld:common\.Tenant\.acme\/common\.Conversation\./);
    // Nothing was written to the CLI's own data folder: it all went through the API.
    const local = await arbor(["ls", "--all"], "", { ARBOR_URL: "" });
    expect(local.stdout).toMatch(/Nothing below/);
  }, 120_000);

  it("lists, reads and shows the events of what the request left, as the local CLI does", async () => {
    const ls = await arbor(["ls"], "", remote());
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(/^common\.Conversation/m);
    const all = await arbor(["ls", "--all"], "", remote());
    expect(all.stdout).toMatch(/^plan\.Task\s+Plan the offsite/m);
    expect(all.stdout).toMatch(/^uip\.Interaction/m);
    const get = await arbor(["get", rootTaskId], "", remote());
    expect(get.code).toBe(0);
    expect(JSON.parse(get.stdout).meta.id).toBe(rootTaskId);
    const events = await arbor(["events", rootTaskId], "", remote());
    expect(events.stdout).toMatch(/^\s+1 \S+ TaskCreated/m);
    expect(events.stdout).toMatch(/TaskCompleted/);
  }, 120_000);

  it("edits the plan in $EDITOR and sends it with the approval, which the remote Arbor runs", async () => {
    const editor = join(cliDir, "keep-logistics.mjs");
    await writeFile(
      editor,
      `import { readFileSync, writeFileSync } from "node:fs";
const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));
plan.subtasks = plan.subtasks.filter((s) => s.name === "Logistics");
writeFileSync(process.argv[2], JSON.stringify(plan));
`,
    );
    const { code, stdout: out } = await arbor(["run", "--lazy", REQUEST], "e\n", {
      ...remote(),
      EDITOR: `"${process.execPath}" "${editor}"`,
      VISUAL: "",
    });
    expect(out).toContain("The edited plan is sent with your approval.");
    expect(out).toMatch(/^└─ ✓ Logistics \[done\]/m);
    expect(out).not.toMatch(/[○◐✓?] Agenda/);
    expect(code).toBe(0);
  }, 120_000);

  it("without an editor, gives the HTTP answer that edits the plan at this Arbor", async () => {
    const { code, stdout: out } = await arbor(["run", "--lazy", REQUEST], "e\nn\n", {
      ...remote(),
      EDITOR: "",
      VISUAL: "",
    });
    expect(out).toContain("No editor is set (VISUAL or EDITOR).");
    expect(out).toMatch(
      new RegExp(`'${served.url}/v1/interactions/cld%3A[^']+uip\\.Interaction\\.[^']+/answer'`),
    );
    expect(out).toMatch(/The request canceled/);
    expect(code).toBe(1);
  }, 120_000);

  it("cancels when stdin ends before a question is answered", async () => {
    const { code, stdout: out } = await arbor(["run", "--lazy", REQUEST], "", remote());
    expect(out).toMatch(/No answer; canceling\. Rerun with --yes/);
    expect(out).toMatch(/The request canceled/);
    expect(code).toBe(1);
  }, 120_000);

  it("says clearly what is wrong: a server it cannot reach, an unknown key, no key, a URN of another tenant", async () => {
    // Run at once: the two to an unreachable Arbor spend seconds in its retries' back-off.
    const [unreachable, wrong, none, other, message] = await Promise.all([
      arbor(["ls"], "", { ARBOR_URL: "http://127.0.0.1:9", ARBOR_KEY: key }),
      arbor(["ls"], "", { ARBOR_URL: served.url, ARBOR_KEY: "arbor_not-a-key" }),
      arbor(["ls"], "", { ARBOR_URL: served.url, ARBOR_KEY: "" }),
      arbor(["get", "cld:common.Tenant.beta/common.Conversation.x"], "", remote()),
      // A message goes with an idempotency key, so it is tried again like a read, then reported.
      arbor(["run", "hello"], "", { ARBOR_URL: "http://127.0.0.1:9", ARBOR_KEY: key }),
    ]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/Cannot reach Arbor at http:\/\/127\.0\.0\.1:9 .*Is ARBOR_URL right/);
    expect(wrong.stderr).toMatch(/does not accept ARBOR_KEY \(401\)/);
    expect(none.stderr).toMatch(/ARBOR_URL is set .* but ARBOR_KEY is not/);
    expect(other.stderr).toMatch(/Not found \(404\)/);
    expect(message.code).toBe(1);
    expect(message.stderr).toMatch(/Cannot reach Arbor at http:\/\/127\.0\.0\.1:9 .*Is ARBOR_URL right/);
  }, 120_000);
});
