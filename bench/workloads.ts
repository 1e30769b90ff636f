import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import Database from "libsql";
import { type RecordedRequest, ScriptedLlm, type ScriptedTurn } from "../shared/adapters/llm/scripted-llm.ts";
import { DEFAULT_BUDGETS } from "../shared/domain/budgets.ts";
import type { Actor } from "../shared/domain/events.ts";
import type { TaskSpec } from "../shared/domain/resources.ts";
import type { TaskView } from "../shared/domain/task-view.ts";
import type { AssistantDefinition, Engine } from "../shared/engine/engine.ts";
import { outputMeta } from "../shared/engine/steps/outcome.ts";
import { PLAN_TOOL } from "../shared/engine/steps/planner.ts";
import { EVALUATE_TOOL } from "../shared/engine/steps/supervisor.ts";
import type { LlmMessage, LlmRequest, LlmResponse, LlmToolSpec } from "../shared/ports/llm.ts";
import type { ToolBinding } from "../shared/ports/tools.ts";
import { createLocalRuntime, type LocalRuntime } from "../shared/runtime/local/local.ts";
import { createLocalEngine } from "../shared/runtime/local/local-engine.ts";
import { builtinBinding } from "../shared/tools/service/builtins.ts";

/**
 * The benchmark workloads, each in two forms:
 *   - on Arbor: the local runtime (files + SQLite + in-process bus) in a fresh data folder, the
 *     real engine, the local embedder and index, the built-in tools, and a scripted model;
 *   - in memory: the same scripted-model calls, tool executions and fan-out with `Promise.all`,
 *     no storage and no bus: the lower bound the orchestration overhead is measured against.
 *
 * The scripted model answers as planner (create_plan), as evaluator (report_evaluation) or as a
 * leaf's assistant (one tool call, then an answer), instantly or after a fixed latency.
 */
export const TENANT = "bench";
const ACTOR: Actor = { id: "user_bench", kind: "human" };

/** Three assistants (plus the tools each may use), so that election has a real choice to make. */
export const ASSISTANTS: AssistantDefinition[] = [
  {
    name: "Budget analyst",
    id: "budget-analyst",
    purpose: "Calculate costs, budgets, totals and amounts per person",
    applicability: "Arithmetic on prices, quantities, budgets and costs",
    tools: ["calculator"],
  },
  {
    name: "Editor",
    id: "editor",
    purpose: "Count the words of drafts, check the length of texts and documents",
    applicability: "Word counts, drafts, texts, documents and their length",
    tools: ["word_count"],
  },
  {
    name: "Coordinator",
    id: "coordinator",
    purpose: "Coordinate workstreams of a project and combine their results into one report",
    applicability: "Plans, workstreams, projects, summaries of results",
    tools: ["calculator", "word_count"],
  },
];

// ---- the plans ------------------------------------------------------------------------------------

export interface TreeShape {
  children: number;
  leavesPerChild: number;
}

/** W1: 1 root, 10 children, 10 leaves each = 111 tasks. */
export const W1_SHAPE: TreeShape = { children: 10, leavesPerChild: 10 };
/** W1-shaped, wider: 1 root, 10 children, 100 leaves each = 1,011 tasks. */
export const W1_1K_SHAPE: TreeShape = { children: 10, leavesPerChild: 100 };
/** W1-shaped, wider still: 1 root, 99 children, 100 leaves each = 10,000 tasks (the most a plan may have). */
export const W1_10K_SHAPE: TreeShape = { children: 99, leavesPerChild: 100 };

export const treeSize = (s: TreeShape): number => 1 + s.children * (1 + s.leavesPerChild);

/** Leaves alternate between a calculator task and a word-count task. */
function leafSpec(child: number, leaf: number): TaskSpec {
  return leaf % 2 === 0
    ? {
        name: `Compute cost ${leaf} of workstream ${child}`,
        purpose: `Calculate the total cost of item ${leaf}: its price multiplied by its quantity`,
      }
    : {
        name: `Count words of draft ${leaf} of workstream ${child}`,
        purpose: `Count the words of draft ${leaf}, a short text document`,
      };
}

/** The whole tree, as the planner returns it in its one create_plan call. */
export function treePlan(shape: TreeShape): TaskSpec {
  return {
    name: "Prepare the project report",
    purpose: "Coordinate every workstream of the project and combine their results into one report",
    evaluation: "Every workstream reported its results",
    subtasks: Array.from({ length: shape.children }, (_, c) => ({
      name: `Workstream ${c + 1}`,
      purpose: `Coordinate workstream ${c + 1} of the project and combine its results`,
      evaluation: "Every task of the workstream reported its result",
      subtasks: Array.from({ length: shape.leavesPerChild }, (_, l) => leafSpec(c + 1, l + 1)),
    })),
  };
}

/** W2: each request is planned as one root task with no subtasks (a leaf: one tool call, then its answer). */
export const SINGLE_PLAN: TaskSpec = {
  name: "Compute the cost per person",
  purpose: "Calculate the cost per person: the total budget divided by the number of people",
};

// ---- the scripted model ---------------------------------------------------------------------------

const firstUser = (r: RecordedRequest): string => {
  const m = r.messages.find((x) => x.role === "user");
  return m && "content" in m ? (m.content ?? "") : "";
};

/** The scripted model's answers: the plan, a passing evaluation, or a leaf's tool call then answer. */
export function benchScript(plan: TaskSpec): (request: RecordedRequest) => ScriptedTurn {
  const planArguments = plan as unknown as Record<string, unknown>;
  return (request) => {
    const tools = request.tools?.map((t) => t.name) ?? [];
    if (tools.includes(PLAN_TOOL.name))
      return { toolCalls: [{ name: PLAN_TOOL.name, arguments: planArguments }] };
    const prompt = firstUser(request);
    if (tools.includes(EVALUATE_TOOL.name)) {
      const results = [...prompt.matchAll(/^## (.+) \[done\]\n(.+)$/gm)].map((m) => `${m[1]}: ${m[2]}`);
      const answer = results.length ? results.join("\n") : "nothing to combine";
      return {
        toolCalls: [
          { name: EVALUATE_TOOL.name, arguments: { passed: true, reason: "The criteria are met.", answer } },
        ],
      };
    }
    const name = /^# Task: (.+)$/m.exec(prompt)?.[1] ?? "task";
    const toolResult = request.messages.findLast((m) => m.role === "tool");
    if (toolResult) return { content: `${name}: ${toolResult.content ?? ""}` };
    const wantsWords = name.startsWith("Count");
    const choice = wantsWords
      ? (["word_count", "calculator"] as const).find((t) => tools.includes(t))
      : (["calculator", "word_count"] as const).find((t) => tools.includes(t));
    if (choice === "calculator")
      return { toolCalls: [{ name: "calculator", arguments: { a: 1200, b: 12, op: "divide" } }] };
    if (choice === "word_count")
      return { toolCalls: [{ name: "word_count", arguments: { text: `A short draft for ${name}` } }] };
    return { content: `${name}: answered without a tool` };
  };
}

export interface CallCounts {
  plan: number;
  evaluation: number;
  leaf: number;
  total: number;
}

export function countCalls(calls: readonly RecordedRequest[]): CallCounts {
  const kinds = calls.map((c) => c.tools?.map((t) => t.name) ?? []);
  const plan = kinds.filter((k) => k.includes(PLAN_TOOL.name)).length;
  const evaluation = kinds.filter((k) => k.includes(EVALUATE_TOOL.name)).length;
  return { plan, evaluation, leaf: calls.length - plan - evaluation, total: calls.length };
}

// ---- Arbor on the local runtime -------------------------------------------------------------------

export interface ArborOptions {
  /** The folder under which a fresh data folder is made (and removed afterwards). */
  baseDir: string;
  durable: boolean;
  /** Stricter durability: no write resolves before its commit is on disk. */
  syncEachWrite?: boolean;
  latencyMs: number;
  /** Give up (throw) when the run is not finished by then. */
  timeoutMs: number;
}

/**
 * Bytes of the files under `dir` (their lengths), once everything in SQLite's WAL is copied into
 * the database and the WAL emptied: the WAL is scratch space that checkpoints reuse (a few MB
 * however long Arbor runs, left at its largest size on close), and what a small run wrote may
 * still be only there. Checkpoint only with the runtime closed; without, the WAL is counted as
 * it is (at the start of a run: the assistants just registered, about 0.1 MB).
 */
async function dirBytes(dir: string, checkpoint: boolean): Promise<number> {
  if (checkpoint) {
    const db = new Database(join(dir, "arbor.db"));
    try {
      db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } finally {
      db.close();
    }
  }
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return total;
}

/** Budgets that let a plan of this shape through (the defaults stop at 200 tasks and 12 children per parent). */
const budgetsFor = (shape: TreeShape) => {
  // Tokens and cost grow with the tree: the default's share per task of a 111-task tree, for each task.
  const scale = Math.max(1, Math.ceil(treeSize(shape) / treeSize(W1_SHAPE)));
  return {
    ...DEFAULT_BUDGETS,
    maxFanOut: Math.max(DEFAULT_BUDGETS.maxFanOut, shape.children, shape.leavesPerChild),
    maxTasks: Math.max(DEFAULT_BUDGETS.maxTasks, treeSize(shape)),
    maxTokens: DEFAULT_BUDGETS.maxTokens * scale,
    maxCostUsd: DEFAULT_BUDGETS.maxCostUsd * scale,
  };
};

interface Arbor {
  rt: LocalRuntime;
  engine: Engine;
  llm: ScriptedLlm;
  /** Resolves with performance.now() when the task's output was announced; rejects past the deadline. */
  finished(taskId: string, deadline: number): Promise<number>;
  /** Closes everything; returns how many bytes the data folder grew by since it was opened. */
  close(): Promise<number>;
}

const resourceEvents = ((v) => (v === "default" || v === "all" || v === "off" ? v : undefined))(
  process.env.ARBOR_RESOURCE_EVENTS,
);

async function openArbor(plan: TaskSpec, options: ArborOptions, shape?: TreeShape): Promise<Arbor> {
  const dataDir = await mkdtemp(join(options.baseDir, "arbor-bench-"));
  const rt = createLocalRuntime(
    {
      mode: "local",
      tenant: TENANT,
      dataDir,
      durable: options.durable,
      syncEachWrite: options.syncEachWrite === true,
      // Which writes go on the bus (ARBOR_RESOURCE_EVENTS=default|all|off): to compare their cost.
      ...(resourceEvents ? { resourceEvents } : {}),
    },
    { lockAs: "arbor bench" },
  ); // holding the data folder's lock, as `npm start` and `arbor serve` do
  const llm = new ScriptedLlm(benchScript(plan), { latencyMs: options.latencyMs, copyRequests: false });
  const engine = await createLocalEngine(rt, {
    llm,
    ...(shape ? { settings: { defaultBudgets: budgetsFor(shape) } } : {}),
  });
  const stop = engine.start();
  await engine.registerAssistants(TENANT, ASSISTANTS);
  await rt.untilDurable();
  const bytesAtOpen = await dirBytes(dataDir, false);

  // Every ending (done, failed, canceled) announces the task's output Message: that is the signal.
  // It counts once it is on disk, as an answer does before a channel may send it. Call finished()
  // right after submit: it listens for that one output only (as a channel waits for its answer),
  // so the observer costs nothing per subtask.
  const listening = new Set<() => void>();
  const finished = (taskId: string, deadline: number) => {
    const urn = outputMeta(taskId).id;
    return new Promise<number>((resolve, reject) => {
      const stopListening = () => {
        clearTimeout(timer);
        off();
        listening.delete(stopListening);
      };
      const timer = setTimeout(
        () => {
          stopListening();
          reject(new Error(`${taskId} did not finish before the deadline`));
        },
        Math.max(0, deadline - performance.now()),
      );
      const off = rt.bus.subscribe({
        name: `bench-observer ${urn}`,
        pattern: { source: ["arbor"], "detail-type": ["RESOURCE_PUT"], detail: { urn: [urn] } },
        handler: async () => {
          await rt.untilDurable();
          const at = performance.now();
          stopListening();
          resolve(at);
        },
      });
      listening.add(stopListening);
      // Submit answers once its writes are on disk, and a quick request can end while it waits:
      // the output may be out before this listens (a channel reads the state after subscribing too).
      void rt.resources.get(urn).then(async (already) => {
        if (!already || !listening.has(stopListening)) return;
        await rt.untilDurable();
        stopListening();
        resolve(performance.now());
      });
    });
  };
  return {
    rt,
    engine,
    llm,
    finished,
    async close() {
      for (const stopListening of listening) stopListening();
      stop();
      await engine.close();
      await rt.close();
      const grew = (await dirBytes(dataDir, true)) - bytesAtOpen;
      await rm(dataDir, { recursive: true, force: true });
      return grew;
    },
  };
}

export interface TreeRun {
  wallMs: number;
  tasks: number;
  /** Tasks that ended `done`. */
  done: number;
  /** Per leaf: TaskStarted -> TaskCompleted, from the event log (ms resolution). */
  leafLatenciesMs: number[];
  calls: CallCounts;
  deadLetters: number;
  /** Tasks per elected assistant (by name). */
  elected: Record<string, number>;
  /** How many bytes the data folder grew by (closed, so the WAL is checkpointed as on a clean stop). */
  diskBytes: number;
}

/** W1 on Arbor: one request whose plan is the whole tree; wall time from submit to the root's output. */
export async function treeOnArbor(shape: TreeShape, options: ArborOptions): Promise<TreeRun> {
  const a = await openArbor(treePlan(shape), options, shape);
  let closed = false;
  try {
    const t0 = performance.now();
    const { rootTaskId } = await a.engine.submit({
      tenant: TENANT,
      text: "Prepare the project report",
      actor: ACTOR,
    });
    const end = await a.finished(rootTaskId, t0 + options.timeoutMs);
    const wallMs = end - t0;
    await a.rt.bus.idle();

    const views: TaskView[] = [];
    const leaves: TaskView[] = [];
    const walk = async (id: string, depthLeft: number): Promise<void> => {
      const view = await a.rt.tasks.view(id);
      if (!view) return;
      views.push(view);
      const children = depthLeft > 0 ? await a.rt.tasks.children(id) : [];
      if (children.length === 0) leaves.push(view);
      for (const c of children) await walk(c.taskId, depthLeft - 1);
    };
    await walk(rootTaskId, 3);
    const leafLatenciesMs: number[] = [];
    for (const leaf of leaves) {
      const events = await a.rt.state.readStream(leaf.taskId);
      const started = events.find((e) => e.type === "TaskStarted")?.at;
      const completed = events.find((e) => e.type === "TaskCompleted")?.at;
      if (started && completed) leafLatenciesMs.push(Date.parse(completed) - Date.parse(started));
    }
    const names = new Map(ASSISTANTS.map((d) => [d.id ?? d.name, d.name]));
    const elected: Record<string, number> = {};
    for (const v of views) {
      const name = names.get(v.assistant?.split(".").pop() ?? "") ?? "(none)";
      elected[name] = (elected[name] ?? 0) + 1;
    }
    const run = {
      wallMs,
      tasks: views.length,
      done: views.filter((v) => v.status === "done").length,
      leafLatenciesMs,
      calls: countCalls(a.llm.calls),
      deadLetters: a.rt.bus.deadLetters.length,
      elected,
    };
    closed = true;
    return { ...run, diskBytes: await a.close() };
  } finally {
    if (!closed) await a.close();
  }
}

export interface RequestsRun {
  wallMs: number;
  requests: number;
  done: number;
  /** Per request, in submission order: submit -> the root's output announced. */
  latenciesMs: number[];
  /** Per request, in submission order: ms after the first submit when its output was announced. */
  finishedAtMs: number[];
  calls: CallCounts;
  deadLetters: number;
  diskBytes: number;
}

/** W2 on Arbor: `requests` single-leaf requests, `inFlight` at once (a new one when one finishes). */
export async function requestsOnArbor(
  requests: number,
  inFlight: number,
  options: ArborOptions,
): Promise<RequestsRun> {
  const a = await openArbor(SINGLE_PLAN, options);
  let closed = false;
  try {
    const latenciesMs: number[] = new Array(requests).fill(Number.NaN);
    const finishedAtMs: number[] = new Array(requests).fill(Number.NaN);
    const roots: string[] = [];
    const t0 = performance.now();
    const deadline = t0 + options.timeoutMs;
    let next = 0;
    const worker = async () => {
      while (next < requests) {
        const i = next++;
        const start = performance.now();
        const { rootTaskId } = await a.engine.submit({ tenant: TENANT, text: `Request ${i}`, actor: ACTOR });
        roots.push(rootTaskId);
        const end = await a.finished(rootTaskId, deadline);
        latenciesMs[i] = end - start;
        finishedAtMs[i] = end - t0;
      }
    };
    await Promise.all(Array.from({ length: Math.min(inFlight, requests) }, worker));
    const wallMs = performance.now() - t0;
    await a.rt.bus.idle();
    let done = 0;
    for (const id of roots) if ((await a.rt.tasks.view(id))?.status === "done") done++;
    const run = {
      wallMs,
      requests,
      done,
      latenciesMs,
      finishedAtMs,
      calls: countCalls(a.llm.calls),
      deadLetters: a.rt.bus.deadLetters.length,
    };
    closed = true;
    return { ...run, diskBytes: await a.close() };
  } finally {
    if (!closed) await a.close();
  }
}

// ---- the in-memory lower bound --------------------------------------------------------------------

const LEAF_SYSTEM = "You are a bench assistant. Work on the task you are given.";

interface Memory {
  llm: ScriptedLlm;
  /** The same built-in functions Arbor's tools are bound to, checked and run directly. */
  tools: Map<string, ToolBinding>;
  toolSpecs: LlmToolSpec[];
}

function memory(plan: TaskSpec, latencyMs: number): Memory {
  const tools = new Map(
    (["calculator", "word_count"] as const).map((n) => [n, builtinBinding(n, n, {})] as const),
  );
  return {
    llm: new ScriptedLlm(benchScript(plan), { latencyMs, copyRequests: false }),
    tools,
    toolSpecs: [...tools.values()].map(({ descriptor: d }) => ({
      name: d.name,
      description: d.description,
      parameters: d.parameters,
    })),
  };
}

const complete = (m: Memory, request: LlmRequest): Promise<LlmResponse> => m.llm.complete(request);

async function planInMemory(m: Memory, text: string): Promise<TaskSpec> {
  const response = await complete(m, {
    system: "plan",
    messages: [{ role: "user", content: text }],
    tools: [PLAN_TOOL],
    toolChoice: { name: PLAN_TOOL.name },
  });
  return response.toolCalls[0]?.arguments as unknown as TaskSpec;
}

/** A leaf: the model's tool call, the tool, the model's answer. Returns the answer and its latency. */
async function leafInMemory(m: Memory, spec: TaskSpec): Promise<{ answer: string; ms: number }> {
  const t0 = performance.now();
  const messages: LlmMessage[] = [{ role: "user", content: `# Task: ${spec.name}\n${spec.purpose ?? ""}` }];
  const first = await complete(m, { system: LEAF_SYSTEM, messages, tools: m.toolSpecs });
  messages.push({ role: "assistant", toolCalls: first.toolCalls });
  for (const call of first.toolCalls) {
    const tool = m.tools.get(call.name);
    const problems = tool?.check(call.arguments) ?? ["unknown tool"];
    const content =
      tool && problems.length === 0
        ? String(await tool.run(call.arguments, { taskId: spec.name, actor: "bench", callId: call.id }))
        : problems.join("; ");
    messages.push({ role: "tool", toolCallId: call.id, content });
  }
  const second = await complete(m, { system: LEAF_SYSTEM, messages, tools: m.toolSpecs });
  return { answer: second.content ?? "", ms: performance.now() - t0 };
}

async function evaluateInMemory(m: Memory, spec: TaskSpec, results: { name: string; answer: string }[]) {
  const prompt = [`# Task: ${spec.name}`, ...results.map((r) => `## ${r.name} [done]\n${r.answer}`)].join(
    "\n\n",
  );
  const response = await complete(m, {
    system: "evaluate",
    messages: [{ role: "user", content: prompt }],
    tools: [EVALUATE_TOOL],
    toolChoice: { name: EVALUATE_TOOL.name },
  });
  return String(response.toolCalls[0]?.arguments.answer ?? "");
}

export interface MemoryRun {
  wallMs: number;
  latenciesMs: number[];
  calls: CallCounts;
}

/** W1 in memory: plan, then every child's leaves with Promise.all, each child's evaluation, the root's. */
export async function treeInMemory(shape: TreeShape, latencyMs: number): Promise<MemoryRun> {
  const m = memory(treePlan(shape), latencyMs);
  const latenciesMs: number[] = [];
  const t0 = performance.now();
  const root = await planInMemory(m, "Prepare the project report");
  const children = await Promise.all(
    (root.subtasks ?? []).map(async (child) => {
      const leaves = await Promise.all(
        (child.subtasks ?? []).map(async (leaf) => {
          const { answer, ms } = await leafInMemory(m, leaf);
          latenciesMs.push(ms);
          return { name: leaf.name, answer };
        }),
      );
      return { name: child.name, answer: await evaluateInMemory(m, child, leaves) };
    }),
  );
  await evaluateInMemory(m, root, children);
  return { wallMs: performance.now() - t0, latenciesMs, calls: countCalls(m.llm.calls) };
}

/** W2 in memory: the same requests (plan, then the leaf), with the same number in flight. */
export async function requestsInMemory(
  requests: number,
  inFlight: number,
  latencyMs: number,
): Promise<MemoryRun> {
  const m = memory(SINGLE_PLAN, latencyMs);
  const latenciesMs: number[] = [];
  const t0 = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < requests) {
      const i = next++;
      const start = performance.now();
      const spec = await planInMemory(m, `Request ${i}`);
      await leafInMemory(m, spec);
      latenciesMs.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, requests) }, worker));
  return { wallMs: performance.now() - t0, latenciesMs, calls: countCalls(m.llm.calls) };
}
