import { MetricUnit, Metrics as PowertoolsMetrics } from "@aws-lambda-powertools/metrics";
import type { InvocationMetrics, MetricName, MetricUnit as Unit } from "../../ports/metrics.ts";

/**
 * The metrics port on Lambda: Powertools Metrics, written as CloudWatch EMF lines on stdout, which
 * Lambda's log stream turns into metrics (no PutMetricData call, no grant). Namespace `Arbor`;
 * dimensions `service` (Powertools' own, `arbor`), `stage` and, for steps, `route`. One
 * invocation's metrics are kept and written together by `flush` at its end.
 */
export const METRICS_NAMESPACE = "Arbor";
export const METRICS_SERVICE = "arbor";

const UNITS: Record<Unit, (typeof MetricUnit)[keyof typeof MetricUnit]> = {
  Count: MetricUnit.Count,
  Milliseconds: MetricUnit.Milliseconds,
};

export class EmfMetrics implements InvocationMetrics {
  readonly #metrics = new PowertoolsMetrics({ namespace: METRICS_NAMESPACE, serviceName: METRICS_SERVICE });

  add(name: MetricName, value: number, unit: Unit = "Count"): void {
    this.#metrics.addMetric(name, UNITS[unit], value);
  }

  /** Writes what this invocation counted, under these dimensions (e.g. stage and route). */
  flush(dimensions: Readonly<Record<string, string>>): void {
    this.#metrics.addDimensions({ ...dimensions });
    this.#metrics.publishStoredMetrics();
  }
}
