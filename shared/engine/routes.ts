import type { EventPattern } from "../kernel/event-pattern/index.ts";
import { DOCUMENT_ADDED } from "../knowledge/documents.ts";
import { COMMANDS, SOURCE } from "./context.ts";

/**
 * The engine's steps and the events that start them: the one source of truth for the in-process
 * subscriptions (`Engine.start`) and for the AWS deployment, where each route is an EventBridge
 * rule of the same name and pattern targeting the step's Lambda function.
 */
export type StepName =
  | "plan"
  | "ready"
  | "turn"
  | "resume"
  | "supervise"
  | "index-output"
  | "activity"
  | "documents";

/**
 * The steps started by a command with exactly one consumer (the step): on AWS each has its own SQS
 * queue, which the command is sent to (about 16 ms to the function instead of an EventBridge
 * rule's 150: bench/aws-path-model.ts). The others start on RESOURCE_PUT, which stays on the bus
 * (its consumers are many: the parent's supervisor, the index, the notify path, operators' rules).
 */
export const QUEUED_STEPS = ["plan", "ready", "turn", "resume", "activity"] as const;
export type QueuedStep = (typeof QUEUED_STEPS)[number];

export interface Route {
  name: StepName;
  pattern: EventPattern;
  /** Waits for a step slot, foreground work first (task starts and turns). */
  queued: boolean;
  /** Whether the step may call the model (longer timeouts on AWS). */
  callsModel: boolean;
  /** Whether the step may run the assistants' tools (a leaf's inner loop): it gets the tools' grants on AWS. */
  runsTools: boolean;
  description: string;
}

const command = (detailType: string): EventPattern => ({ source: [SOURCE], "detail-type": [detailType] });
const outputPut: EventPattern = {
  source: ["arbor"],
  "detail-type": [COMMANDS.resourcePut],
  detail: { name: ["output"] },
};

export const ROUTES: readonly Route[] = [
  {
    name: "plan",
    pattern: command(COMMANDS.plan),
    queued: false,
    callsModel: true,
    runsTools: true,
    description:
      "Plans a request: one model call returns the task tree, which is checked and stored; starts it, and runs its first leaf",
  },
  {
    name: "ready",
    pattern: command(COMMANDS.ready),
    queued: true,
    callsModel: true,
    runsTools: true,
    description: "Starts a task: a parent starts its children, a leaf runs its inner loop",
  },
  {
    name: "turn",
    pattern: command(COMMANDS.turn),
    queued: true,
    callsModel: true,
    runsTools: true,
    description:
      "Runs a leaf's inner loop from its stored transcript: tool results and model calls, each persisted",
  },
  {
    name: "resume",
    pattern: command(COMMANDS.resume),
    queued: false,
    callsModel: false,
    runsTools: false,
    description: "Continues a task after a person answered its interaction",
  },
  {
    name: "supervise",
    pattern: outputPut,
    queued: false,
    callsModel: true,
    runsTools: false,
    description: "Counts a child's completion and, when a round is complete, evaluates it",
  },
  {
    name: "index-output",
    pattern: outputPut,
    queued: false,
    callsModel: false,
    runsTools: false,
    description: "Embeds a finished task's output for later tasks' context",
  },
  {
    name: "activity",
    pattern: command(COMMANDS.activity),
    queued: false,
    callsModel: false,
    runsTools: true,
    description: "Runs a fire-and-forget activity call once, through the tool port, after its turn went on",
  },
  {
    name: "documents",
    pattern: command(DOCUMENT_ADDED),
    queued: false,
    callsModel: false,
    runsTools: false,
    description: "Reads an added document, cuts it into chunks and embeds them for search",
  },
];
