import { componentLogger } from "../shared/observability/logger.ts";
import { coldStart, type FunctionDeps, type LambdaContext } from "./cold-start.ts";

/**
 * The engine's watchdog on a schedule: finds work that stopped moving (no event for
 * ARBOR_WATCHDOG_STALE_MS) and sends its command again. Every step is idempotent, so a re-sent
 * command either continues lost work or does nothing. The scheduled event itself carries
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
  const instance = coldStart(deps);
  const handle = async (_event?: unknown, context?: LambdaContext): Promise<{ redriven: number }> => {
    const run = log.createChild();
    if (context?.awsRequestId) run.appendPersistentKeys({ requestId: context.awsRequestId });
    const { engine, config } = await instance.get();
    const result = await engine.watchdog(config.watchdogStaleMs);
    run.info("watchdog run", { ...result, staleMs: config.watchdogStaleMs });
    return result;
  };
  return Object.assign(handle, { close: instance.close });
}

/** The Lambda entry point; configured by the environment the engine stack sets. */
export const handler = createWatchdogHandler();
