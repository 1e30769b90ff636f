import { createInterface } from "node:readline/promises";
import { ASSISTANTS, REQUEST, script } from "../../examples/offsite/scenario.ts";
import { costText } from "../../shared/domain/budgets.ts";
import type { Actor } from "../../shared/domain/events.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { isTerminal } from "../../shared/domain/task-state.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { FALLBACK_ID } from "../../shared/engine/default-team.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import { pendingInteractions } from "../../shared/engine/interactions.ts";
import { usageOf } from "../../shared/engine/usage.ts";
import type { Embedder } from "../../shared/ports/embeddings.ts";
import type { Llm } from "../../shared/ports/llm.ts";
import type { ToolPort } from "../../shared/ports/tools.ts";
import { type LocalConfig, MODEL_HELP } from "../../shared/runtime/config.ts";
import { configuredSettings } from "../../shared/runtime/engine-wiring.ts";
import { createLocalRuntime } from "../../shared/runtime/local/local.ts";
import { createLocalEngine } from "../../shared/runtime/local/local-engine.ts";
import { folderPolicy, scriptedModel } from "../../shared/runtime/local/local-parts.ts";
import { createEmbedder, createModel } from "../../shared/runtime/models.ts";
import { startTelemetry } from "../../shared/runtime/telemetry.ts";
import { loadToolsConfig } from "../../shared/tools/service/config.ts";
import { UsageError } from "../command.ts";
import { ask } from "./ask.ts";
import { pausing, planEditor } from "./edit-plan.ts";
import { LiveTree, localTree } from "./live-tree.ts";
import { heading, note, printable } from "./render.ts";

/**
 * `arbor run "<message>"`: one request on the local runtime, with the task tree drawn live, the
 * person's approvals and answers asked in the terminal, and the answer printed at the end.
 */
export interface RunOptions {
  text: string | undefined;
  example: string | undefined;
  lazy: boolean;
  yes: boolean;
}

const PERSON: Actor = { id: "user_cli", kind: "human" };

export async function runCommand(config: LocalConfig, options: RunOptions): Promise<number> {
  const setup = chooseModel(config, options);
  if (!setup) {
    process.stderr.write(`${MODEL_HELP}\n`);
    return 2;
  }
  // OTEL_EXPORTER_OTLP_ENDPOINT (and the SDK's other settings) turn traces on; none: nothing is loaded.
  const telemetry = await startTelemetry("arbor");
  const { rt, engine } = await openLocalEngine(config, setup, "arbor run");
  const stop = engine.start();
  const lines = createInterface({ input: process.stdin, terminal: false });
  const answers = lines[Symbol.asyncIterator]();
  const editPlan = planEditor({
    env: process.env,
    budgets: engine.deps.settings.defaultBudgets,
    howElse: `Run again with one, e.g. EDITOR=nano arbor run --lazy "<message>", and answer e; or send the request to arbor serve, whose HTTP API takes an edited plan as the answer: POST /v1/interactions/<urn>/answer {"selectedOptionId":"approve","inputValue":"<the plan as JSON text>"}.`,
    ...pausing(lines),
  });
  try {
    // The example brings its own team; otherwise a tenant without one gets the default team
    // (ARBOR_TEAM_FILE, else the built-in one) before its first request, and keeps what `arbor
    // team apply` gave it.
    if (setup.assistants) await engine.registerAssistants(config.tenant, setup.assistants);
    const started = Date.now();
    const { rootTaskId } = await engine.submit({
      tenant: config.tenant,
      text: setup.text,
      actor: PERSON,
      mode: options.lazy ? "lazy" : "eager",
    });
    process.stdout.write(
      `${heading("Request")}: ${setup.text}\n${note(`model: ${setup.llm.id}, data: ${config.dataDir}`)}\n\n`,
    );
    const live = new LiveTree(localTree(rt, rootTaskId), process.stdout);
    const off = rt.bus.subscribe({
      name: "cli-progress",
      pattern: { source: ["arbor.engine", "arbor"] },
      handler: async () => live.schedule(),
    });
    const onInterrupt = () => void engine.cancel(rootTaskId, PERSON, "interrupted in the terminal");
    process.once("SIGINT", onInterrupt);
    try {
      for (let rounds = 0; rounds < 1000; rounds++) {
        await rt.bus.idle();
        await live.draw();
        const root = await rt.tasks.view(rootTaskId);
        if (!root) {
          // Planning never got as far as the root task: say why (the bus kept the failed delivery).
          const last = rt.bus.deadLetters.at(-1)?.error as Error | undefined;
          process.stdout.write(`\nThe request failed: it could not be planned. ${last?.message ?? ""}\n`);
          return 1;
        }
        if (isTerminal(root.status)) break;
        const pending = await waitingInteractions(rt, engine.deps, rootTaskId);
        if (pending.length === 0) {
          await engine.watchdog(60_000); // nothing in flight and nobody to ask: drive what stopped
          continue;
        }
        await rt.untilDurable(); // a question shown is a question on disk
        for (const interaction of pending) {
          live.release();
          const answer = await ask(interaction, options.yes, answers, process.stdout, editPlan);
          if (!answer) {
            process.stdout.write(`No answer; canceling. Rerun with --yes to approve everything.\n`);
            await engine.cancel(rootTaskId, PERSON, "no answer in the terminal");
            break;
          }
          await engine
            .respond(interaction.meta.id, answer, PERSON)
            .catch((e: Error) => process.stdout.write(`${e.message}\n`));
        }
      }
    } finally {
      process.off("SIGINT", onInterrupt);
      off();
    }
    await rt.bus.idle();
    live.stop();
    await live.draw(true);
    const { view, output } = await engine.result(rootTaskId);
    const usage = await usageOf(engine.deps, rootTaskId);
    await rt.untilDurable(); // an answer shown is an answer on disk
    process.stdout.write(
      `\n${heading(view?.status === "done" ? "Answer" : `The request ${view?.status}`)}\n${printable(output ?? view?.failureReason ?? "", true)}\n`,
    );
    process.stdout.write(
      `${note(
        `\n${usage.inputTokens + usage.outputTokens} tokens, ${costText(usage)}, ${Math.round((Date.now() - started) / 100) / 10} s. Inspect: npx arbor events ${rootTaskId}`,
      )}\n`,
    );
    return view?.status === "done" ? 0 : 1;
  } finally {
    lines.close();
    stop();
    await engine.close();
    await rt.close();
    await telemetry?.shutdown();
  }
}

/**
 * The local runtime (holding the data folder's lock as `lockAs`) and an engine on it with the
 * chosen model, as `arbor run` and `arbor eval run` open them: the configured tools, team file,
 * outbound rules and policy.
 */
export async function openLocalEngine(
  config: LocalConfig,
  setup: { llm: Llm; embedder?: Embedder },
  lockAs: string,
  wrapTools?: (tools: ToolPort) => ToolPort,
) {
  const rt = createLocalRuntime(config, { lockAs });
  const fallback = `${tenantUrn(config.tenant)}/common.Assistant.${FALLBACK_ID}`;
  try {
    const engine = await createLocalEngine(rt, {
      llm: setup.llm,
      // The model server's embedding model, when one is configured (ARBOR_EMBEDDING_MODEL).
      ...(setup.embedder ? { embedder: setup.embedder } : {}),
      settings: {
        fallbackAssistant: fallback,
        ...configuredSettings(config),
      },
      toolsConfig: loadToolsConfig(config.toolsFile),
      ...(config.teamFile ? { teamFile: config.teamFile } : {}),
      ...(config.outbound ? { outbound: config.outbound } : {}),
      ...(config.policy?.engine === "opa" ? { policy: await folderPolicy(config.policy.dir) } : {}),
      ...(wrapTools ? { wrapTools } : {}),
    });
    return { rt, engine };
  } catch (error) {
    await rt.close();
    throw error;
  }
}

/** The model (and the example's team) for a run: the offline example's scripted model, or the configured one. */
export function chooseModel(
  config: LocalConfig,
  options: RunOptions,
): { llm: Llm; embedder?: Embedder; assistants?: AssistantDefinition[]; text: string } | undefined {
  if (options.example) {
    if (options.example !== "offsite")
      throw new UsageError(`Unknown example "${options.example}". Try: --example offsite`);
    return { llm: scriptedModel(script), assistants: ASSISTANTS, text: REQUEST };
  }
  if (!options.text)
    throw new UsageError('Say what to do: arbor run "<message>" (or try: arbor run --example offsite)');
  if (!config.model) return undefined;
  const embedder = createEmbedder(config.model);
  return { llm: createModel(config.model), text: options.text, ...(embedder ? { embedder } : {}) };
}

async function waitingInteractions(
  rt: ReturnType<typeof createLocalRuntime>,
  deps: Parameters<typeof pendingInteractions>[0],
  rootId: string,
) {
  const out: InteractionResource[] = [];
  const walk = async (id: string) => {
    const v = await rt.tasks.view(id);
    if (v?.status === "awaiting_user") out.push(...(await pendingInteractions(deps, id)));
    for (const c of await rt.tasks.children(id)) await walk(c.taskId);
  };
  await walk(rootId);
  return out;
}
