import type { EventPattern } from "../kernel/event-pattern/index.ts";

/**
 * Event bus port: publish events; subscribe handlers with EventBridge event patterns.
 * Delivery is asynchronous and at least once, so every handler must be idempotent.
 * Adapters: in-process (local), EventBridge PutEvents + rule targets (AWS).
 */
export interface BusEventInput {
  /** Unique id; consumers deduplicate on it. */
  id: string;
  source: string;
  detailType: string;
  detail: Record<string, unknown>;
  /** URNs the event concerns (EventBridge's `resources`). */
  resources?: string[];
  /** ISO 8601; defaults to now. */
  time?: string;
  /** The W3C trace context it carries; default: the publisher's active one, while tracing is on. */
  traceparent?: string;
}

/** What a handler receives: EventBridge's envelope, on AWS and locally alike. */
export interface BusEnvelope {
  version: "0";
  id: string;
  "detail-type": string;
  source: string;
  account: string;
  time: string;
  region: string;
  resources: string[];
  detail: Record<string, unknown>;
  /** The trace context the publisher was in (carried in the detail over the wire, kernel/tracing.ts). */
  traceparent?: string;
}

export type BusHandler = (event: BusEnvelope) => Promise<void>;

export interface Subscription {
  /** Stable name (a rule name on AWS). */
  name: string;
  pattern: EventPattern;
  handler: BusHandler;
}

export interface EventBus {
  /** Resolves once the bus has accepted every event (not once handlers ran). */
  publish(events: readonly BusEventInput[]): Promise<void>;
  /** Returns a function that removes the subscription. */
  subscribe(subscription: Subscription): () => void;
  close(): Promise<void>;
}

/** EventBridge's limit for one entry; every adapter enforces it. */
export const MAX_EVENT_BYTES = 256 * 1024;
