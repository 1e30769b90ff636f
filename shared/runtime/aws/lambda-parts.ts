import { EmfMetrics } from "../../adapters/aws/emf-metrics.ts";
import { meteredAudit } from "../../adapters/shared/metered.ts";
import type { AuditLog } from "../../ports/audit-log.ts";
import type { InvocationMetrics, Metrics } from "../../ports/metrics.ts";

export { EVENT_ID_DETAIL_KEY } from "../../adapters/aws/eventbridge-event-bus.ts";

/**
 * What the Lambda entry points (functions/) take from the AWS composition root besides the runtime
 * (aws.ts): their metrics, and the audit log counted into them. Chosen here, so that no function
 * picks an adapter itself.
 */

/** A function invocation's metrics: CloudWatch EMF lines through Powertools Metrics. */
export const lambdaMetrics = (): InvocationMetrics => new EmfMetrics();

/** The runtime with its audit log counted into `metrics` (each tool call by its outcome). */
export const withMeteredAudit = <T extends { audit: AuditLog }>(rt: T, metrics: Metrics): T => ({
  ...rt,
  audit: meteredAudit(rt.audit, metrics),
});
