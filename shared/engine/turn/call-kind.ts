import type { ToolDescriptor, ToolResult } from "../../ports/tools.ts";

/**
 * What a leaf's turn does with one tool call of the model, decided from what is known of it and
 * nothing else (turn/direct.ts acts on the answer):
 *
 *   settled      a remote agent's answer is already on record (remote-calls.ts): it is the result
 *   unavailable  the assistant may not use the tool, or no tool has the name: an error result
 *   ask          the tool asks a person (ask_person): asked once, the turn waits (ask.ts)
 *   invalid      its arguments cannot run as they stand (a bad `_outputPath`, or the tool's schema
 *                for a risky tool): an error result, and nobody is asked to confirm it
 *   confirm      a risky tool: it runs once a person approves these arguments (approvals.ts)
 *   run          anything else: it runs now (a remote agent's answer may come later: pending)
 */
export type CallKind =
  | { kind: "settled"; result: ToolResult }
  | { kind: "unavailable"; result: ToolResult }
  | { kind: "ask" }
  | { kind: "invalid"; result: ToolResult }
  | { kind: "confirm" }
  | { kind: "run" };

export interface CallFacts {
  call: { name: string };
  /** The assistant's name and the tools it lists. */
  assistant: { name: string; tools: readonly string[] };
  /** The tool of that name, if there is one. */
  descriptor: ToolDescriptor | undefined;
  /** A remote agent's recorded answer to this call (remote-calls.ts), if it has one. */
  settled?: ToolResult | undefined;
  /** Whether the tool asks a person (ask.ts). */
  asksPerson: boolean;
  /** The call's meta-properties were refused (activities.ts: prepareCall). */
  preparedError?: ToolResult | undefined;
  /** What the tool's schema finds wrong with the arguments (checked for risky tools only). */
  problems: readonly string[];
}

export function callKind(f: CallFacts): CallKind {
  if (f.settled) return { kind: "settled", result: f.settled };
  if (!f.descriptor || !f.assistant.tools.includes(f.call.name))
    return {
      kind: "unavailable",
      result: { content: `Tool "${f.call.name}" is not available to ${f.assistant.name}`, isError: true },
    };
  if (f.asksPerson) return { kind: "ask" };
  if (f.preparedError) return { kind: "invalid", result: f.preparedError };
  if (f.problems.length > 0)
    return {
      kind: "invalid",
      result: { content: `Invalid arguments for ${f.call.name}: ${f.problems.join("; ")}`, isError: true },
    };
  return f.descriptor.risky ? { kind: "confirm" } : { kind: "run" };
}
