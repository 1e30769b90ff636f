import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { ToolBinding } from "../../shared/ports/tools.ts";
import { MAX_STORED_RESULT_CHARS, ToolService } from "../../shared/tools/service/tool-service.ts";
import { Harness } from "./engine-harness.ts";
import { isEvaluation, isPlan, pass, planOf } from "./scenarios.ts";
import {
  ctx,
  LOOPBACK_ALLOWED,
  type LocalHttpServer,
  listenLocal,
  openToolWorld,
  TASK,
  type ToolWorld,
} from "./tool-world.ts";

/**
 * Whatever a tool returns or throws, and however large, a call ends as a recorded outcome (a stored
 * result or a failed call the model reads), never as an exception: an exception left the call
 * "requested" for ever, its task in progress, and the tool running again on every re-drive.
 */

/** /size/<n> answers n characters; every request is counted. */
let server: LocalHttpServer;
let base: string;
let hits = 0;
beforeAll(async () => {
  server = await listenLocal((req, res) => {
    hits++;
    const n = Number(/^\/size\/(\d+)/.exec(req.url ?? "")?.[1] ?? 0);
    res.setHeader("content-type", "text/plain");
    res.end("y".repeat(n));
  });
  base = server.base;
});
afterAll(() => server.close());

let world: ToolWorld;
beforeEach(async () => {
  world = await openToolWorld("arbor-results-");
  hits = 0;
});
afterEach(() => world.close());

const sized = (n: number) => ({
  kind: "http",
  url: `${base}/size/${n}`,
  method: "GET",
  description: `Returns ${n} characters`,
  parameters: { type: "object" },
});

/** A tool service with one tool whose binding does `run` (what no configured kind would do). */
function oddTool(run: ToolBinding["run"]): ToolService {
  const binding: ToolBinding = {
    descriptor: {
      name: "odd",
      kind: "http",
      description: "A tool that misbehaves",
      parameters: { type: "object" },
      risky: false,
      pure: false,
    },
    check: () => [],
    run,
  };
  return new ToolService([binding], world.options());
}

const stagesOf = async (taskId = TASK) =>
  (await world.rt.audit.forTask(taskId)).map((r) => `${r.callId}:${r.stage}`);

describe("results of any size", () => {
  for (const size of [1_000_001, 5_000_000]) {
    it(`a ${size}-character result is stored (its first ${MAX_STORED_RESULT_CHARS} characters) and the call completes`, async () => {
      const tools = await ToolService.open({ tools: { big: sized(size) } }, world.options());
      const context = ctx();
      const result = await tools.execute("big", {}, context);
      expect(result.isError).toBeUndefined();
      const urn = /stored as (\S+) and the rest was dropped/.exec(result.content)?.[1] as string;
      expect(result.content).toContain(`The result is ${size} characters long`);
      expect(result.content.length).toBeLessThan(3_000);
      const stored = await world.rt.resources.getAs("common.Message", urn);
      expect(stored?.content).toHaveLength(MAX_STORED_RESULT_CHARS);
      expect(await world.rt.audit.forTask(TASK)).toMatchObject([
        { callId: context.callId, stage: "requested" },
        { callId: context.callId, stage: "completed", resultUrn: urn, resultChars: size },
      ]);
      expect(hits).toBe(1);
    }, 60_000);
  }

  it("a result that cannot be stored is a failed call, recorded, and the model is told", async () => {
    // A task URN so long that a resource under it has no valid key: the tool runs, its result has nowhere to go.
    const deep = `${TASK}/plan.Task.${"d".repeat(1000 - TASK.length - 12)}`;
    const tools = await ToolService.open({ tools: { big: sized(20_000) } }, world.options());
    const context = ctx(deep);
    const result = await tools.execute("big", {}, context);
    expect(result).toMatchObject({
      isError: true,
      content: expect.stringMatching(/^big ran, but its result \(20000 characters\) could not be stored: /),
    });
    expect(await stagesOf(deep)).toEqual([`${context.callId}:requested`, `${context.callId}:failed`]);
  });
});

describe("whatever a binding returns or throws", () => {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const cases: [string, () => Promise<unknown>, RegExp][] = [
    ["returns undefined", async () => undefined, /^odd returned no text \(undefined\)/],
    ["returns a cycle", async () => cyclic, /^odd returned no text \(an object that is not JSON\)/],
    ["returns a BigInt", async () => 10n ** 30n, /^odd returned no text \(bigint\)/],
    ["throws null", async () => Promise.reject(null), /^odd failed: it threw null/],
    ["throws undefined", async () => Promise.reject(undefined), /^odd failed: it threw undefined/],
    [
      "throws an object without a prototype",
      async () => Promise.reject(Object.create(null)),
      /^odd failed: it threw \{\}/,
    ],
    [
      "throws what the outbound guard throws for a large response",
      async () => Promise.reject(new Error("response larger than 10485760 bytes")),
      /^odd failed: response larger than 10485760 bytes$/,
    ],
    [
      "throws synchronously",
      () => {
        throw new TypeError("not a function");
      },
      /^odd failed: not a function$/,
    ],
  ];
  for (const [what, run, message] of cases) {
    it(`${what}: a failed call the model reads, recorded`, async () => {
      const tools = oddTool(run as ToolBinding["run"]);
      const context = ctx();
      const result = await tools.execute("odd", {}, context);
      expect(result).toMatchObject({ isError: true, content: expect.stringMatching(message) });
      const records = await world.rt.audit.forTask(TASK);
      expect(records.map((r) => r.stage)).toEqual(["requested", "failed"]);
      expect(records[1]).toMatchObject({ reason: "error" });
    });
  }

  it("returns JSON instead of text: it is passed on as JSON", async () => {
    const tools = oddTool((async () => ({ ok: true, n: 3 })) as unknown as ToolBinding["run"]);
    expect(await tools.execute("odd", {}, ctx())).toEqual({ content: '{"ok":true,"n":3}' });
  });

  it("throws a 5,000,000-character error: the model and the audit get its start", async () => {
    const tools = oddTool(async () => {
      throw new Error("e".repeat(5_000_000));
    });
    const result = await tools.execute("odd", {}, ctx());
    expect(result.isError).toBe(true);
    expect(result.content.length).toBeLessThanOrEqual(8000);
    expect(result.content).toMatch(/\[\.\.\. error cut\]$/);
    const [, failed] = await world.rt.audit.forTask(TASK);
    expect(failed?.error).toBe(result.content);
  });
});

describe("a large result in a running task", () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it("the task finishes with one call to the tool, and a re-drive does not call it again", async () => {
    const READER: AssistantDefinition[] = [
      { name: "Reader", id: "reader", purpose: "Fetch the big report and summarise it", tools: ["big"] },
    ];
    const script: ScriptFunction = (r) => {
      if (isPlan(r)) return planOf({ name: "Summarise", purpose: "Fetch the big report and summarise it" });
      if (isEvaluation(r)) return pass();
      const told = r.messages.find((m) => m.role === "tool");
      return told
        ? { content: `summary of ${/characters long/.test(told.content ?? "") ? "a stored result" : "?"}` }
        : { toolCalls: [{ name: "big", arguments: {} }] };
    };
    h = await Harness.create({
      script,
      assistants: READER,
      toolsConfig: { tools: { big: sized(1_000_001) } },
      outbound: LOOPBACK_ALLOWED,
    });
    const { rootTaskId } = await h.submit("Summarise the big report");
    await h.idle();
    const { view, output } = await h.engine.result(rootTaskId);
    expect(view?.status).toBe("done");
    expect(output).toMatch(/summary of a stored result/);
    expect(hits).toBe(1);
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000);
    await h.idle();
    expect(hits).toBe(1);
    const leaf = [...(await h.tree(rootTaskId)).values()].find((v) => v.title === "Summarise");
    const records = await h.rt.audit.forTask(leaf?.taskId ?? rootTaskId);
    expect(records.map((r) => r.stage)).toEqual(["requested", "completed"]);
  }, 60_000);
});
