import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activityKey } from "../../shared/engine/turn/activity-step.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { addKey, arborEnv, killAll, killHard, type Served, startServe } from "../support/arbor-process.ts";
import { fetchApi } from "../support/http.ts";
import { eventually } from "../support/until.ts";

/**
 * A real `arbor serve` child killed with SIGKILL at the worst moments of an assistant that asks a
 * person and then fires an activity: right after the question is asked, right after the answer's
 * 204, and right after the model's turn that fires `notify_log` (no `_outputPath`: fire-and-forget).
 * The model is an OpenAI-compatible endpoint in this process. After each restart the request goes
 * on: the question is asked once and answered once, the task ends, and the activity's effect (its
 * log line) happens once, never twice; when the kill fell inside its run, its outcome is recorded
 * as unknown, never silently repeated, and never left pending.
 */
type Msg = { role: string; content?: string | null; tool_calls?: { function: { name: string } }[] };
type Body = { messages: Msg[]; tools?: { function: { name: string } }[] };

let dir: string;
let env: NodeJS.ProcessEnv;
let key: string;
let model: Server;
const outputs: string[] = [];
/** Called when the model has just answered with the notify_log call (a kill goes here). */
let afterFire: (() => void) | undefined;

const call = (name: string, args: unknown) => ({
  choices: [
    {
      message: {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: `call-${name}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
        ],
      },
      finish_reason: "tool_calls",
    },
  ],
  usage: { prompt_tokens: 10, completion_tokens: 5 },
});
const text = (content: string) => ({
  choices: [{ message: { role: "assistant", content }, finish_reason: "stop" }],
  usage: { prompt_tokens: 10, completion_tokens: 5 },
});

/** The scripted model: plan one leaf; the leaf asks, then fires notify_log, then answers; evaluations pass. */
function answer(body: Body): { json: unknown; fired: boolean } {
  const tools = (body.tools ?? []).map((t) => t.function.name);
  if (tools.includes("create_plan"))
    return {
      json: call("create_plan", { name: "Book the room", purpose: "Book a room, asking which day" }),
      fired: false,
    };
  if (tools.includes("report_evaluation"))
    return {
      json: call("report_evaluation", { passed: true, reason: "ok", answer: "booked" }),
      fired: false,
    };
  const called = (name: string) =>
    body.messages.some(
      (m) => m.role === "assistant" && (m.tool_calls ?? []).some((c) => c.function.name === name),
    );
  if (!called("ask_person")) return { json: call("ask_person", { title: "Which day?" }), fired: false };
  if (!called("notify_log"))
    return { json: call("notify_log", { message: "room booked", level: "warn" }), fired: true };
  return { json: text("booked"), fired: false };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-kill-ask-"));
  model = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => {
      raw += d;
    });
    req.on("end", () => {
      const { json, fired } = answer(JSON.parse(raw) as Body);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(json), () => {
        if (fired) afterFire?.();
      });
    });
  });
  await new Promise<void>((resolve) => model.listen(0, "127.0.0.1", resolve));
  const teamFile = join(dir, "team.json");
  const toolsFile = join(dir, "tools.json");
  await writeFile(
    teamFile,
    JSON.stringify({
      assistants: [
        { name: "Generalist", id: "generalist", purpose: "Book rooms", tools: ["ask_person", "notify_log"] },
      ],
    }),
  );
  await writeFile(
    toolsFile,
    JSON.stringify({
      tools: {
        ask_person: { kind: "builtin", function: "ask_person" },
        notify_log: { kind: "builtin", function: "notify_log" },
      },
    }),
  );
  env = arborEnv(join(dir, "data"), {
    ARBOR_MODEL_PROVIDER: "openai",
    ARBOR_MODEL: "house-model",
    ARBOR_OPENAI_BASE_URL: `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`,
    ARBOR_TEAM_FILE: teamFile,
    ARBOR_TOOLS_FILE: toolsFile,
    POWERTOOLS_LOG_LEVEL: "WARN", // the activity's note is its effect, counted in the output
  });
  key = await addKey(env, "user_ada");
});
afterAll(async () => {
  await killAll();
  await new Promise((resolve) => model.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

async function serve(): Promise<Served> {
  const s = await startServe(env);
  void s.exited.then(() => outputs.push(s.output()));
  return s;
}
const api = <T>(s: Served, method: string, path: string, body?: unknown) =>
  fetchApi<T>(s.url, method, path, key, body);
const taskPath = (urn: string) => `/v1/tasks/${encodeURIComponent(urn)}`;
type Question = { links: { answer: string } };
const questions = async (s: Served, root: string) =>
  (await api<{ interactions?: Question[] }>(s, "GET", `${taskPath(root)}/interactions`)).json.interactions ??
  [];
const status = async (s: Served, root: string) =>
  (await api<{ task?: { status: string } }>(s, "GET", taskPath(root))).json.task?.status;

describe("arbor serve killed around a question and a fire-and-forget activity", () => {
  it("asks once, takes the answer once, and runs the activity once, across three SIGKILLs", async () => {
    let s = await serve();
    const sent = await api<{ rootTaskId: string }>(s, "POST", "/v1/messages", { text: "Book a room" });
    expect(sent.status).toBe(202);
    const { rootTaskId } = sent.json;

    // 1. Killed right after the question is asked.
    expect(
      (
        await eventually(
          () => questions(s, rootTaskId),
          (q) => q.length > 0,
          60_000,
        )
      ).length,
    ).toBe(1);
    await killHard(s);

    // 2. Restarted: the same one question waits; killed right after the answer's 204.
    s = await serve();
    const [q] = await eventually(
      () => questions(s, rootTaskId),
      (qs) => qs.length > 0,
      60_000,
    );
    expect(q).toBeDefined();
    const fired = new Promise<void>((resolve) => {
      afterFire = resolve;
    });
    const answered = await api(s, "POST", q?.links.answer as string, { inputValue: "Tuesday" });
    expect(answered.status).toBe(204);
    await killHard(s);

    // 3. Restarted: the answer is kept (nothing waits), the turn fires notify_log; killed right after the model answered it.
    s = await serve();
    const current = s;
    afterFire = () => current.child.kill("SIGKILL");
    await Promise.race([fired, current.exited]);
    await killHard(current); // fired before the second kill already: killed here, after its restart
    afterFire = undefined;

    // 4. Restarted once more: the request ends.
    s = await serve();
    expect(
      await eventually(
        () => status(s, rootTaskId),
        (st) => st === "done",
        60_000,
      ),
    ).toBe("done");
    expect(await questions(s, rootTaskId)).toEqual([]);
    // The activity is settled (not left to run) before the last process stops.
    const disk = () =>
      createLocalRuntime({ mode: "local", tenant: "acme", dataDir: join(dir, "data"), durable: true });
    await s.stop();

    const rt = disk();
    try {
      const interactions = await rt.resources.children(rootTaskId, "uip.Interaction");
      expect(interactions.map((i) => (i as { status?: string }).status)).toEqual(["answered"]);
      const record = await rt.state.get<{ status?: string }>(activityKey(rootTaskId, "turn-0002-tool-0"));
      const runs = outputs
        .join("\n")
        .split("\n")
        .filter((l) => l.includes("activity note")).length;
      // Once or, when the kill fell inside its run, an outcome recorded as unknown: never twice, never pending.
      expect([record?.status, runs]).toSatisfy(
        ([st, n]: [string | undefined, number]) =>
          (st === "done" && n === 1) || (st === "unknown" && n === 0),
      );
    } finally {
      await rt.close();
    }
  }, 240_000);
});
