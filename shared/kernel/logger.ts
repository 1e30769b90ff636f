import { Logger } from "@aws-lambda-powertools/logger";

/**
 * The structured logger (Powertools). One root; components take a child that names them.
 * Log level comes from POWERTOOLS_LOG_LEVEL (read by Powertools itself); the CLI sets it to
 * WARN unless asked for more, so people see progress, not JSON.
 */
export const rootLogger = new Logger({ serviceName: "arbor" });

export type ArborLogger = Logger;

export function componentLogger(component: string, keys: Record<string, string> = {}): Logger {
  const child = rootLogger.createChild();
  child.appendPersistentKeys({ component, ...keys });
  return child;
}
