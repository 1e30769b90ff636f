/**
 * The metrics port: counts and durations the operations of a deployment watch (dashboards,
 * alarms). The domain and the engine never see it: the Lambda entry points count their steps and
 * the watchdog's re-drives, and the composition root wraps the model and the tool audit log
 * (shared/adapters/shared/metered.ts) to count tokens and tool calls. On AWS the adapter writes
 * CloudWatch EMF lines through Powertools Metrics (namespace `Arbor`); elsewhere nothing is kept.
 */
export const METRIC_NAMES = [
  /** A step invocation that finished / threw (Lambda then retries it, then dead-letters it). */
  "StepSucceeded",
  "StepFailed",
  "StepDuration",
  /** One model call (complete or stream) and the tokens it was billed. */
  "ModelCalls",
  "InputTokens",
  "OutputTokens",
  /** A tool call that ended (its audit record written), and those of them that failed. */
  "ToolCalls",
  "ToolCallsFailed",
  /** Work the watchdog sent again because it had stopped moving. */
  "WatchdogRedriven",
  /** The notify function: queue messages handled, those that failed (handed out again), ids a sweep queued. */
  "NotifyMessages",
  "NotifyMessagesFailed",
  "NotifySwept",
] as const;
export type MetricName = (typeof METRIC_NAMES)[number];
export type MetricUnit = "Count" | "Milliseconds";

export interface Metrics {
  add(name: MetricName, value: number, unit?: MetricUnit): void;
}

export const NO_METRICS: Metrics = { add: () => {} };

/** Metrics kept for one invocation and written together at its end, under its dimensions. */
export interface InvocationMetrics extends Metrics {
  flush(dimensions: Readonly<Record<string, string>>): void;
}
