import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Script, ScriptedLlm } from "../../shared/adapters/llm/scripted-llm.ts";
import type { InProcessEventBusOptions } from "../../shared/adapters/local/in-process-event-bus.ts";
import type { Actor } from "../../shared/domain/events.ts";
import type { TaskView } from "../../shared/domain/task-view.ts";
import {
  type EngineSettings,
  type FaultInjector,
  type FaultPoint,
  SimulatedCrash,
} from "../../shared/engine/context.ts";
import type { AssistantDefinition, Engine } from "../../shared/engine/engine.ts";
import { type InteractionResponse, pendingInteractions } from "../../shared/engine/interactions.ts";
import type { OutboundSettings } from "../../shared/outbound/policy.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";
import type { ToolPort } from "../../shared/ports/tools.ts";
import { createLocalRuntime, type LocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { TaskLog } from "../../shared/store/task-log.ts";

/**
 * A local Arbor for end-to-end tests: real adapters (SQLite or files, in-process bus, local embedder
 * and index), the scripted model, a controllable clock. `restart()` drops the process state and
 * opens the same data folder again, as after a crash.
 */
export const PERSON: Actor = { id: "user_ada", kind: "human" };

export interface HarnessOptions {
  script: Script;
  assistants: AssistantDefinition[];
  settings?: Partial<EngineSettings>;
  /** The tool registry (default: the built-in tools). */
  toolsConfig?: unknown;
  /** Outbound HTTP for the tools (default: the outbound guard of `outbound`). */
  fetch?: typeof fetch;
  /** What the outbound guard lets through (default: public addresses only; peers on 127.0.0.1 need LOOPBACK_ALLOWED). */
  outbound?: OutboundSettings;
  bus?: InProcessEventBusOptions;
  faults?: FaultInjector;
  /** Where resources live (default: the local default, SQLite). */
  objectStore?: "sqlite" | "files";
  /**
   * The tools, made anew for each process (default: the service built from `toolsConfig`); given
   * the data folder, so a port can reach what shares it (a tool function on its own runtime).
   */
  tools?: (rt: LocalRuntime, dataDir: string) => Promise<ToolPort>;
  /** Where Arbor is reached from outside (EngineOptions.publicUrl): A2A agents push there. */
  publicUrl?: () => string | undefined;
  /** Hold the data folder's lock as `arbor serve` does (the runtime is then the folder's sole worker). */
  lockAs?: string;
  /**
   * The state store and event log (default: the data folder's SQLite), opened anew at each
   * (re)start, e.g. DynamoDB Local with lagging indexes (engine-lagging.int.test.ts).
   */
  state?: () => StateStore;
  /** How many leaf steps wait or run (Runtime.leafSteps; default: the engine's own step queue's). */
  leafSteps?: () => Promise<number>;
}

export class Harness {
  rt!: LocalRuntime;
  engine!: Engine;
  llm!: ScriptedLlm;
  now = Date.parse("2026-06-01T09:00:00.000Z");
  #ids = 0;
  #stop: (() => void) | undefined;
  readonly dataDir: string;
  readonly options: HarnessOptions;

  private constructor(dataDir: string, options: HarnessOptions) {
    this.dataDir = dataDir;
    this.options = options;
  }

  static async create(options: HarnessOptions): Promise<Harness> {
    const h = new Harness(await mkdtemp(join(tmpdir(), "arbor-e2e-")), options);
    await h.open(options.faults);
    await h.engine.registerAssistants("acme", options.assistants);
    return h;
  }

  async open(faults?: FaultInjector): Promise<void> {
    const rt = createLocalRuntime(
      {
        mode: "local",
        tenant: "acme",
        dataDir: this.dataDir,
        durable: false,
        ...(this.options.objectStore ? { objectStore: this.options.objectStore } : {}),
      },
      {
        bus: { retryDelayMs: () => 1, ...this.options.bus },
        clock: () => new Date(this.now),
        ...(this.options.lockAs ? { lockAs: this.options.lockAs } : {}),
      },
    );
    const state = this.options.state?.();
    const withState = state ? { ...rt, state, tasks: new TaskLog(state) } : rt;
    const { leafSteps } = this.options;
    this.rt = leafSteps ? { ...withState, leafSteps } : withState;
    this.llm = new ScriptedLlm(this.options.script);
    this.engine = await createLocalEngine(this.rt, {
      llm: this.llm,
      clock: () => new Date(this.now),
      newId: () => `id${String(++this.#ids).padStart(6, "0")}`,
      ...(this.options.settings ? { settings: this.options.settings } : {}),
      ...(this.options.toolsConfig ? { toolsConfig: this.options.toolsConfig } : {}),
      ...(this.options.tools ? { tools: await this.options.tools(this.rt, this.dataDir) } : {}),
      ...(this.options.fetch ? { fetch: this.options.fetch } : {}),
      ...(this.options.outbound ? { outbound: this.options.outbound } : {}),
      ...(this.options.publicUrl ? { publicUrl: this.options.publicUrl } : {}),
      ...(faults ? { faults } : {}),
    });
    this.#stop = this.engine.start();
  }

  /** As after a crash: in-flight work is lost, the data folder stays; a new process opens it. */
  async restart(): Promise<void> {
    this.#stop?.();
    await this.engine.close();
    await this.rt.close();
    await this.open();
  }

  async idle(): Promise<void> {
    await this.rt.bus.idle();
  }

  advance(ms: number): void {
    this.now += ms;
  }

  submit(text: string, mode: "eager" | "lazy" = "eager") {
    return this.engine.submit({ tenant: "acme", text, actor: PERSON, mode });
  }

  /** Every task of a request, root first, as a map from title to view. */
  async tree(rootId: string): Promise<Map<string, TaskView>> {
    const out = new Map<string, TaskView>();
    const walk = async (id: string) => {
      const v = await this.rt.tasks.view(id);
      if (!v) return;
      out.set(v.title, v);
      for (const c of await this.rt.tasks.children(id)) await walk(c.taskId);
    };
    await walk(rootId);
    return out;
  }

  /** Interactions waiting for a person, anywhere below the root. */
  async pending(rootId: string) {
    const views = [...(await this.tree(rootId)).values()].filter((v) => v.status === "awaiting_user");
    return (await Promise.all(views.map((v) => pendingInteractions(this.engine.deps, v.taskId)))).flat();
  }

  /**
   * Drives a request to its end as a person and time would, in at most 20 rounds: each lets the
   * engine run until idle (then calls `afterIdle`), ends once the root has ended, answers every
   * question waiting (with `answer`; approve by default), or, when none waits, moves the clock past
   * every claim's staleness and runs the watchdog, which re-drives what stopped.
   */
  async runToEnd(
    rootId: string,
    options: { answer?: InteractionResponse; afterIdle?: () => void } = {},
  ): Promise<void> {
    for (let round = 0; round < 20; round++) {
      await this.idle();
      options.afterIdle?.();
      const view = await this.rt.tasks.view(rootId);
      if (view && ["done", "failed", "canceled"].includes(view.status)) return;
      const pending = await this.pending(rootId);
      if (pending.length > 0) {
        for (const p of pending)
          await this.engine.respond(p.meta.id, options.answer ?? { selectedOptionId: "approve" }, PERSON);
        continue;
      }
      this.advance(10 * 60_000); // past every claim's staleness
      await this.engine.watchdog(60_000);
    }
  }

  async close(): Promise<void> {
    this.#stop?.();
    await this.engine.close();
    await this.rt.close();
    await rm(this.dataDir, { recursive: true, force: true });
  }
}

/**
 * A process that "dies" at the first hit of `point` for `step`, and at every later hit (a dead
 * process does nothing more).
 */
export class CrashAt implements FaultInjector {
  fired = false;
  readonly point: FaultPoint;
  readonly step: string;

  constructor(point: FaultPoint, step: string) {
    this.point = point;
    this.step = step;
  }

  hit(point: FaultPoint, step: string): void {
    if (this.fired || (point === this.point && step === this.step)) {
      this.fired = true;
      throw new SimulatedCrash(point, step);
    }
  }
}
