import { afterEach, describe, expect, it, vi } from "vitest";
import * as z from "zod";
import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { Message } from "../../shared/domain/resources.ts";
import { COMMANDS, SOURCE } from "../../shared/engine/context.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { readState } from "../../shared/engine/turn/activity-state.ts";
import { activityKey } from "../../shared/engine/turn/activity-step.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";
import type { ActivityCall, ScopedMessage, ToolDescriptor } from "../../shared/ports/tools.ts";
import {
  type ActivityFunction,
  activityBinding,
  defineActivity,
} from "../../shared/tools/activities/activities.ts";
import { builtinBinding } from "../../shared/tools/service/builtins.ts";
import { ToolService } from "../../shared/tools/service/tool-service.ts";
import { CrashAt, Harness, type HarnessOptions, PERSON } from "./engine-harness.ts";
import { isPlan, planOf } from "./scenarios.ts";

/**
 * Activities and output paths (seed 004) end to end: the real engine on local adapters with the
 * scripted model. A leaf is a single-task plan (the root is the leaf).
 */

/** The leaf's n-th model call (1-based), counted by the assistant turns it was sent. */
const turnOf = (r: LlmRequest) => r.messages.filter((m) => m.role === "assistant").length + 1;

/** A leaf that makes the given turns, then answers. */
function leafScript(turns: readonly ScriptedTurn[], answer = "finished"): ScriptFunction {
  return (r) => {
    if (isPlan(r)) return planOf({ name: "Forecast", purpose: "Check the forecast and note it" });
    return turns[turnOf(r) - 1] ?? { content: answer };
  };
}

interface Seen {
  call: ActivityCall;
  tool: ToolDescriptor;
  context: readonly ScopedMessage[];
}

/** A generous bound for vi.waitFor on a busy machine (its default is 1 s). */
const WAIT = { timeout: 120_000, interval: 20 };

/** Gates still shut at the end of a test are opened, so that its harness can close. */
const gates: (() => void)[] = [];

/** A gate a handler waits on until the test opens it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  gates.push(open);
  return { opened, open };
}

let h: Harness | undefined;
afterEach(async () => {
  for (const open of gates.splice(0)) open();
  await h?.close();
  h = undefined;
});

/** A harness whose tools are these bindings (as a tool service opened on the harness's runtime). */
async function harness(
  assistants: AssistantDefinition[],
  script: ScriptFunction,
  activities: Record<string, ActivityFunction>,
  extra: Partial<HarnessOptions> = {},
): Promise<Harness> {
  const created = await Harness.create({
    script,
    assistants,
    tools: async (rt) =>
      new ToolService(
        [
          ...Object.entries(activities).map(([name, f]) => ({
            ...activityBinding(name, f),
            timeoutMs: 600_000,
          })),
          builtinBinding("word_count", "word_count", {}),
        ],
        {
          resources: rt.resources,
          audit: rt.audit,
          clock: () => new Date(created?.now ?? Date.now()),
          untilDurable: () => rt.untilDurable(),
        },
      ),
    ...extra,
  });
  return created;
}

async function toolResults(taskId: string): Promise<Message[]> {
  const all = (await h?.rt.resources.children(taskId, "common.Message")) as Message[];
  return all.filter((m) => m.role === "tool").sort((a, b) => a.meta.name.localeCompare(b.meta.name));
}

describe("a fire-and-forget activity", () => {
  /** Counts its runs and its effects; each run waits for the test to open the gate. */
  function slowNote() {
    const g = gate();
    const counts = { runs: 0, effects: 0 };
    const seen: Seen[] = [];
    const fn = defineActivity({
      description: "Notes something, slowly",
      schema: z.object({ message: z.string() }),
      run: async (call, tool, context) => {
        counts.runs++;
        seen.push({ call, tool, context });
        await g.opened;
        counts.effects++;
        return "noted";
      },
    });
    return { g, counts, seen, fn };
  }
  const NOTER: AssistantDefinition[] = [
    { name: "Noter", id: "noter", purpose: "Check the forecast and note it", tools: ["slow_note"] },
  ];
  const CALL = {
    id: "call-note-1",
    name: "slow_note",
    arguments: { message: "rain at noon", _instance: "first-note" },
  };

  it("runs once, is not awaited, is audited, and gets (call, tool, context)", async () => {
    const note = slowNote();
    // Every event is delivered twice: the activity still runs once.
    h = await harness(
      NOTER,
      leafScript([{ toolCalls: [CALL] }]),
      { slow_note: note.fn },
      { bus: { deliveries: 2 } },
    );
    const { rootTaskId } = await h.submit("Check the forecast and note it");

    // The leaf finishes while the activity is still running (its handler waits on the gate).
    await vi.waitFor(async () => {
      expect((await h?.engine.result(rootTaskId))?.view?.status).toBe("done");
      expect(note.counts.runs).toBe(1);
    }, WAIT);
    expect(note.counts).toEqual({ runs: 1, effects: 0 });
    const [started] = await toolResults(rootTaskId);
    expect(started?.content).toMatch(/^Started slow_note in the background \(fire-and-forget/);
    expect((await h.engine.result(rootTaskId)).output).toBe("finished");

    note.g.open();
    await h.idle();
    expect(note.counts).toEqual({ runs: 1, effects: 1 });

    // The handler's three arguments.
    const [seen] = note.seen;
    expect(seen?.call).toEqual({
      id: "call-note-1",
      name: "slow_note",
      arguments: { message: "rain at noon" },
      _instance: "first-note",
    });
    expect(seen?.tool.name).toBe("slow_note");
    expect(seen?.tool.activity).toBe(true);
    expect(Object.keys(seen?.tool.parameters.properties as object)).toEqual(["message", "_outputPath"]);
    expect(seen?.context.map((m) => m.role)).toEqual(["user", "assistant"]);
    expect(seen?.context[0]?.content).toMatch(/^# Task: Forecast/);
    expect(seen?.context[1]?.content).toContain(
      '[calls: slow_note {"message":"rain at noon","_instance":"first-note"}]',
    );
    const turn1 = (await h.rt.resources.children(rootTaskId, "common.Message")).find(
      (m) => m.meta.name === "turn-0001",
    );
    expect(seen?.context[1]?.urn).toBe(turn1?.meta.id);

    // Audited as any call: requested, then completed, once.
    const audit = (await h.rt.audit.forTask(rootTaskId)).filter((r) => r.callId === "call-note-1");
    expect(audit.map((r) => [r.tool, r.stage, r.attempt ?? 1])).toEqual([
      ["slow_note", "requested", 1],
      ["slow_note", "completed", 1],
    ]);
    const record = await h.rt.state.get(activityKey(rootTaskId, "turn-0001-tool-0"));
    expect(record?.status).toBe("done");

    // A duplicate of the command (another id), and the watchdog later: nothing more runs.
    await h.rt.bus.publish([
      {
        id: "a-duplicate",
        source: SOURCE,
        detailType: COMMANDS.activity,
        detail: { taskId: rootTaskId, slot: "turn-0001-tool-0" },
      },
    ]);
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000);
    await h.idle();
    expect(note.counts).toEqual({ runs: 1, effects: 1 });
    expect((await h.rt.audit.forTask(rootTaskId)).filter((r) => r.callId === "call-note-1")).toHaveLength(2);
  });

  it("a crash between recording the call and publishing its command still runs it once", async () => {
    const note = slowNote();
    note.g.open();
    h = await harness(
      NOTER,
      leafScript([{ toolCalls: [CALL] }]),
      { slow_note: note.fn },
      {
        faults: new CrashAt("before-publish", COMMANDS.activity),
      },
    );
    const { rootTaskId } = await h.submit("Check the forecast and note it");
    await h.idle();
    // Recorded, never sent: nothing ran, the turn has no result yet.
    expect((await h.rt.state.get(activityKey(rootTaskId, "turn-0001-tool-0")))?.status).toBe("requested");
    expect(note.counts.runs).toBe(0);
    expect(await toolResults(rootTaskId)).toEqual([]);

    await h.restart(); // a new process, no faults
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000); // re-drives the turn, and the activity's record
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    expect(note.counts).toEqual({ runs: 1, effects: 1 });
    expect((await h.rt.state.get(activityKey(rootTaskId, "turn-0001-tool-0")))?.status).toBe("done");
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000);
    await h.idle();
    expect(note.counts).toEqual({ runs: 1, effects: 1 });
  });

  it("a run that crashed mid-way (started, no outcome) is not run again", async () => {
    let runs = 0;
    const fn = defineActivity({
      description: "Sends a notice",
      schema: z.object({ message: z.string() }),
      run: () => {
        runs++;
        throw new Error("unreachable: the test records a crashed attempt instead");
      },
    });
    h = await harness(NOTER, leafScript([]), { slow_note: fn });
    const taskId = "cld:common.Tenant.acme/plan.Task.t-crashed";
    const call = { id: "call-x", name: "slow_note", arguments: { message: "hi" } };
    // The record of a call whose attempt started and never ended (the process died during it).
    await h.rt.state.transact([
      {
        op: "put",
        record: {
          key: activityKey(taskId, "turn-0001-tool-0"),
          kind: "activity",
          parent: taskId,
          status: "requested",
          updatedAt: new Date(h.now).toISOString(),
          data: {
            taskId,
            slot: "turn-0001-tool-0",
            turn: 1,
            actor: "cld:x",
            allowedTools: ["slow_note"],
            call,
          },
        },
        expectedVersion: 0,
      },
    ]);
    await h.rt.audit.record([
      {
        at: new Date(h.now).toISOString(),
        taskId,
        callId: "call-x",
        tool: "slow_note",
        actor: "cld:x",
        argumentsHash: "0".repeat(64),
        stage: "requested",
        attempt: 1,
      },
    ]);
    await h.rt.bus.publish([
      {
        id: "cmd-1",
        source: SOURCE,
        detailType: COMMANDS.activity,
        detail: { taskId, slot: "turn-0001-tool-0" },
      },
    ]);
    await h.idle();
    expect(runs).toBe(0);
    const record = await h.rt.state.get<{ outcome?: string }>(activityKey(taskId, "turn-0001-tool-0"));
    expect(record?.status).toBe("unknown");
    expect(record?.data.outcome).toMatch(/never ended/);
  });

  it("a risky one runs only once a person allowed it, and then once", async () => {
    let runs = 0;
    const risky = defineActivity({
      description: "Sends a notice to everyone",
      schema: z.object({ message: z.string() }),
      risky: true,
      run: () => {
        runs++;
        return "sent";
      },
    });
    h = await harness(NOTER, leafScript([{ toolCalls: [CALL] }]), { slow_note: risky });
    const { rootTaskId } = await h.submit("Check the forecast and note it");
    await h.idle();
    const [question] = await h.pending(rootTaskId);
    expect(question?.binding?.tool).toBe("slow_note");
    expect(runs).toBe(0);
    expect(await h.rt.state.get(activityKey(rootTaskId, "turn-0001-tool-0"))).toBeUndefined();
    await h.engine.respond(question?.meta.id as string, { selectedOptionId: "approve" }, PERSON);
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    expect(runs).toBe(1);
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000);
    await h.idle();
    expect(runs).toBe(1);
  });

  it("a command lost after its record (its task long ended): the watchdog sends it again, once", async () => {
    const note = slowNote();
    note.g.open();
    h = await harness(NOTER, leafScript([]), { slow_note: note.fn });
    const taskId = "cld:common.Tenant.acme/plan.Task.t-lost";
    const call = { id: "call-lost", name: "slow_note", arguments: { message: "hi" } };
    await h.rt.state.transact([
      {
        op: "put",
        record: {
          key: activityKey(taskId, "turn-0002-tool-3"),
          kind: "activity",
          parent: taskId,
          status: "requested",
          updatedAt: new Date(h.now).toISOString(),
          data: {
            taskId,
            slot: "turn-0002-tool-3",
            turn: 2,
            actor: "cld:x",
            allowedTools: ["slow_note"],
            call,
          },
        },
        expectedVersion: 0,
      },
    ]);
    await h.engine.watchdog(60_000); // too fresh yet: nothing
    await h.idle();
    expect(note.counts.runs).toBe(0);
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000);
    await h.engine.watchdog(60_000); // twice: the second finds it done (or held)
    await h.idle();
    expect(note.counts).toEqual({ runs: 1, effects: 1 });
    expect(note.seen[0]?.call).toEqual(call);
    expect((await h.rt.state.get(activityKey(taskId, "turn-0002-tool-3")))?.status).toBe("done");
  });

  it("a malformed command changes nothing", async () => {
    const note = slowNote();
    h = await harness(NOTER, leafScript([]), { slow_note: note.fn });
    await h.rt.bus.publish([
      {
        id: "bad-1",
        source: SOURCE,
        detailType: COMMANDS.activity,
        detail: { taskId: "x", slot: "../../etc" },
      },
      {
        id: "bad-2",
        source: SOURCE,
        detailType: COMMANDS.activity,
        detail: { taskId: "x", slot: "turn-0001-tool-0" },
      },
    ]);
    await h.idle();
    expect(note.counts.runs).toBe(0);
    expect(h.rt.bus.deadLetters).toEqual([]);
  });
});

describe("output paths", () => {
  const WEATHER: AssistantDefinition[] = [
    {
      name: "Weather",
      id: "weather",
      purpose: "Check the forecast and note it",
      tools: ["compare_threshold", "word_count", "pick"],
    },
  ];

  it("a branching activity writes the branch it chose, only that one, and the next turn sees it", async () => {
    h = await Harness.create({
      script: leafScript([
        {
          toolCalls: [
            {
              id: "c1",
              name: "compare_threshold",
              arguments: { value: 31, threshold: 25, _outputPath: "state.hot || state.cold" },
            },
          ],
        },
      ]),
      assistants: [{ ...(WEATHER[0] as AssistantDefinition), tools: ["compare_threshold"] }],
      toolsConfig: { tools: { compare_threshold: { kind: "builtin", function: "compare_threshold" } } },
    });
    const { rootTaskId } = await h.submit("Check the forecast and note it");
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const state = await readState(h.engine.deps, rootTaskId);
    expect(state.map((e) => [e.path, e.value, e.source])).toEqual([
      [
        "state.hot",
        { value: 31, threshold: 25, above: true },
        { tool: "compare_threshold", callId: "c1", turn: 1 },
      ],
    ]);
    const [result] = await toolResults(rootTaskId);
    expect(result?.content).toBe(
      'Stored at state.hot (chosen of state.hot || state.cold).\n{"value":31,"threshold":25,"above":true}',
    );
    const second = h.llm.calls.filter((r) => !isPlan(r))[1] as LlmRequest;
    expect(second.system).toContain(
      '# Task state\nWhat calls with _outputPath stored so far:\n- state.hot = {"value":31',
    );
    // The model saw _outputPath advertised on the activity.
    const first = h.llm.calls.filter((r) => !isPlan(r))[0] as LlmRequest;
    const props = first.tools?.[0]?.parameters.properties as Record<string, { description?: string }>;
    expect(props._outputPath?.description).toMatch(/state\.sunny \|\| state\.rainy/);
  });

  it("a crash after the state is written and before the result: the re-driven turn writes the same, once", async () => {
    h = await Harness.create({
      script: leafScript([
        {
          toolCalls: [
            {
              id: "c1",
              name: "compare_threshold",
              arguments: { value: 3, threshold: 25, _outputPath: "state.hot || state.cold" },
            },
          ],
        },
      ]),
      assistants: [{ ...(WEATHER[0] as AssistantDefinition), tools: ["compare_threshold"] }],
      toolsConfig: { tools: { compare_threshold: { kind: "builtin", function: "compare_threshold" } } },
      faults: new CrashAt("after-write", "state"),
    });
    const { rootTaskId } = await h.submit("Check the forecast and note it");
    await h.idle();
    const written = await readState(h.engine.deps, rootTaskId);
    expect(written.map((e) => e.path)).toEqual(["state.cold"]);
    expect(await toolResults(rootTaskId)).toEqual([]);
    await h.restart();
    h.advance(20 * 60_000);
    await h.engine.watchdog(60_000);
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const state = await readState(h.engine.deps, rootTaskId);
    expect(state).toEqual(written); // the same document, nothing beside it
    expect((await toolResults(rootTaskId)).map((r) => r.content)).toEqual([
      'Stored at state.cold (chosen of state.hot || state.cold).\n{"value":3,"threshold":25,"above":false}',
    ]);
  });

  it("a handler that names a path it was not offered gets an error, and nothing is written", async () => {
    const pick = defineActivity({
      description: "Picks a path",
      schema: z.object({}),
      run: () => ({ outputPath: "state.elsewhere", value: 1 }),
    });
    const handler = vi.fn(pick.run);
    h = await harness(
      WEATHER,
      leafScript([
        { toolCalls: [{ id: "p1", name: "pick", arguments: { _outputPath: "state.a || state.b" } }] },
        { toolCalls: [{ id: "p2", name: "pick", arguments: { _outputPath: "state.a; rm -rf" } }] },
        { toolCalls: [{ id: "p3", name: "pick", arguments: { _outputPath: "other.a" } }] },
        { toolCalls: [{ id: "p4", name: "pick", arguments: { _outputPath: `state.${"a.".repeat(300)}b` } }] },
        { toolCalls: [{ id: "p5", name: "pick", arguments: { _outputPath: 42 } }] },
      ]),
      { pick: { ...pick, run: handler } },
    );
    const { rootTaskId } = await h.submit("Check the forecast and note it");
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const results = await toolResults(rootTaskId);
    expect(results.map((r) => r.isError)).toEqual([true, true, true, true, true]);
    expect(results[0]?.content).toMatch(
      /chose "state\.elsewhere", which is not one of state\.a \|\| state\.b/,
    );
    expect(results[1]?.content).toMatch(/^Invalid _outputPath "state\.a; rm -rf" is not a state path/);
    expect(results[2]?.content).toMatch(/is not a state path/);
    expect(results[3]?.content).toMatch(/longer than 500 characters/);
    expect(results[4]?.content).toMatch(/must be a string/);
    expect(handler).toHaveBeenCalledTimes(1); // the invalid paths ran nothing
    expect(await readState(h.engine.deps, rootTaskId)).toEqual([]);
  });

  it("latent calls: a stored one (a branching path collapsed to its first) and ephemeral ones shown once", async () => {
    h = await harness(
      WEATHER,
      leafScript([
        {
          toolCalls: [
            {
              id: "w1",
              name: "word_count",
              arguments: { text: "a b c", _outputPath: "state.words || state.other" },
            },
            { id: "w2", name: "word_count", arguments: { text: "x y" } },
          ],
        },
        { toolCalls: [{ id: "w3", name: "word_count", arguments: { text: "one" } }] },
      ]),
      {
        pick: defineActivity({ description: "unused", schema: z.object({}), run: () => "x" }),
      },
    );
    const { rootTaskId } = await h.submit("Check the forecast and note it");
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    const state = await readState(h.engine.deps, rootTaskId);
    expect(state.map((e) => [e.path, e.value, e.collapsedFrom])).toEqual([
      ["state.words", "3", "state.words || state.other"],
    ]);
    const results = await toolResults(rootTaskId);
    expect(results.map((r) => [r.meta.name, r.content, r.ephemeral])).toEqual([
      [
        "turn-0001-tool-0",
        "Stored at state.words (state.words || state.other collapsed to its first alternative: this tool does not branch).\n3",
        undefined,
      ],
      ["turn-0001-tool-1", "2", true],
      ["turn-0002-tool-0", "1", true],
    ]);
    const leafCalls = h.llm.calls.filter((r) => !isPlan(r));
    const toolTexts = (r: LlmRequest | undefined) =>
      r?.messages.filter((m) => m.role === "tool").map((m) => m.content);
    // Turn 2 sees turn 1's ephemeral result; turn 3 sees turn 2's, and turn 1's no more.
    expect(toolTexts(leafCalls[1])).toEqual([expect.stringMatching(/^Stored at state\.words/), "2"]);
    expect(toolTexts(leafCalls[2])).toEqual([
      expect.stringMatching(/^Stored at state\.words/),
      "[an intermediate result, shown once: elided]",
      "1",
    ]);
    expect(leafCalls[2]?.system).toContain('- state.words = "3"');
    // word_count is not an activity, but in this leaf it advertises _outputPath too.
    const wc = leafCalls[0]?.tools?.find((t) => t.name === "word_count");
    expect(Object.keys(wc?.parameters.properties as object)).toContain("_outputPath");
  });

  it("a leaf without activities runs as before: nothing stripped, nothing advertised, nothing elided", async () => {
    h = await Harness.create({
      script: leafScript([
        {
          toolCalls: [
            { id: "w1", name: "word_count", arguments: { text: "a b c", _outputPath: "state.words" } },
          ],
        },
        { toolCalls: [{ id: "w2", name: "word_count", arguments: { text: "x" } }] },
      ]),
      assistants: [{ name: "Counter", id: "counter", purpose: "Count words", tools: ["word_count"] }],
      toolsConfig: { tools: { word_count: { kind: "builtin", function: "word_count" } } },
    });
    const { rootTaskId } = await h.submit("Count words");
    await h.idle();
    expect((await h.engine.result(rootTaskId)).view?.status).toBe("done");
    expect(await readState(h.engine.deps, rootTaskId)).toEqual([]);
    const results = await toolResults(rootTaskId);
    expect(results.map((r) => [r.content, r.ephemeral])).toEqual([
      ["3", undefined],
      ["1", undefined],
    ]);
    const leafCalls = h.llm.calls.filter((r) => !isPlan(r));
    expect(Object.keys(leafCalls[0]?.tools?.[0]?.parameters.properties as object)).toEqual(["text"]);
    expect(leafCalls[2]?.messages.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["3", "1"]);
    expect(leafCalls[2]?.system).not.toContain("# Task state");
  });
});
