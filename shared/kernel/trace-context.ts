/**
 * A W3C `traceparent` as Arbor carries it (version 00): `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`.
 * One pattern for every place one is accepted: events, the tool function's payload, kernel/tracing.ts.
 */
export const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
