import { sweepExperiments } from "../shared/evals/driver.ts";
import { componentLogger } from "../shared/kernel/logger.ts";
import { lambdaMetrics } from "../shared/runtime/aws/lambda-parts.ts";
import { coldStart, type FunctionDeps, type LambdaContext } from "./cold-start.ts";

/**
 * The engine's watchdog on a schedule: finds work that stopped moving (no event for
 * ARBOR_WATCHDOG_STALE_MS) and sends its command again. Every step is idempotent, so a re-sent
 * command either continues lost work or does nothing. It sweeps the running experiments too
 * (shared/evals/driver.ts). The scheduled event itself carries
 * nothing the watchdog needs.
 */
export type WatchdogHandler = ((
  event?: unknown,
  context?: LambdaContext,
) => Promise<{ redriven: number }>) & {
  close(): Promise<void>;
};

const log = componentLogger("watchdog");

export function createWatchdogHandler(deps: FunctionDeps = {}): WatchdogHandler {
  const metrics = deps.metrics ?? lambdaMetrics();
  const instance = coldStart({ ...deps, metrics });
  const handle = async (_event?: unknown, context?: LambdaContext): Promise<{ redriven: number }> => {
    const run = log.createChild();
    if (context?.awsRequestId) run.appendPersistentKeys({ requestId: context.awsRequestId });
    const { engine, config } = await instance.get();
    try {
      const result = await engine.watchdog(config.watchdogStaleMs);
      // Running experiments: runs past their deadline canceled, ends whose event was lost scored.
      const experiments = await sweepExperiments(engine);
      run.info("watchdog run", { ...result, experiments, staleMs: config.watchdogStaleMs });
      // Zero too: a steady series the re-drive alarm (infra/constructs/ops-alarms.ts) reads.
      metrics.add("WatchdogRedriven", result.redriven);
      await engine.deps.resources.settled();
      return result;
    } finally {
      metrics.flush({ stage: config.stage ?? "unknown" });
    }
  };
  return Object.assign(handle, { close: instance.close });
}

/** The Lambda entry point; configured by the environment the engine stack sets. */
export const handler = createWatchdogHandler();
