import type { LlmToolSpec } from "./llm.ts";

/**
 * Tool port: what an assistant may call. The engine lists the tools an assistant is allowed and
 * executes the calls the model makes. Arguments are validated before anything runs; a failure is a
 * result the model can read (`isError`), not an exception.
 */
export interface ToolContext {
  /** The task on whose behalf the tool runs. */
  taskId: string;
  /** Who is acting (the assistant's URN). */
  actor: string;
  /** The model's id for this call: it pairs the audit records of one call. */
  callId: string;
  /** The tools the acting assistant is configured with (what policy lets it call). */
  allowedTools?: readonly string[];
  signal?: AbortSignal;
  /**
   * Set by the tool service for the binding (a caller's own value is ignored): the call's
   * idempotency key, the same for every attempt of one call (see idempotencyKeyOf), which each kind
   * of tool passes on (HTTP: the `Idempotency-Key` header; Lambda: the client context; MCP: `_meta`;
   * A2A: the message id and metadata), so that a tool can recognise a repeat and not act twice.
   */
  idempotencyKey?: string;
  /** Set by the tool service: which run of the call this is, from 1. */
  attempt?: number;
}

/** What earlier attempts of one call left in the audit log. */
export interface CallHistory {
  /** Runs of the call started so far (0: it never ran). */
  attempts: number;
  /**
   * How the last attempt ended: `unknown` when it was started (recorded as requested) and has no
   * recorded outcome, as after a crash during it; absent when there was none.
   */
  last?: "completed" | "failed" | "unknown";
  /** When the last attempt was recorded (its request, or its outcome). */
  lastAt?: string;
  /** The key every attempt of the call gets. */
  idempotencyKey: string;
  /**
   * An attempt is running now, in this process (the step that runs it was driven again while the
   * call is out): running the call again joins it instead of starting another.
   */
  running?: boolean;
}

export interface ToolResult {
  content: string;
  isError?: boolean;
}

/** What a tool name is bound to, by configuration. */
export type ToolKind = "builtin" | "http" | "lambda" | "mcp" | "a2a";

export interface ToolDescriptor extends LlmToolSpec {
  kind: ToolKind;
  /** Risky tools run only after a person confirms the exact arguments. */
  risky: boolean;
  /**
   * The tool does nothing outside Arbor (a function of its arguments): running it again after a
   * crash changes nothing anyone can see, so it need not wait for what led to it to be on disk.
   */
  pure: boolean;
}

export interface ToolPort {
  /** Every tool there is (ListTools). */
  list(): ToolDescriptor[];
  /** Descriptors of the named tools that exist (unknown names are left out); they may be frozen. */
  describe(names: readonly string[]): ToolDescriptor[];
  /**
   * The problems with these arguments for this tool, each naming its field; none when they are
   * valid (or the tool is unknown: execute says so). Lets a caller refuse a call before asking a
   * person to confirm it.
   */
  check(name: string, args: Record<string, unknown>): string[];
  /**
   * Runs one call (ExecuteTool): a new attempt of it, numbered after those the audit log holds.
   * Never throws for the call's own failures, whatever the tool does or returns: they are results.
   */
  execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult>;
  /**
   * What the audit log says of a call's attempts so far: lets a caller see that a call with effects
   * was started and never ended (a crash), so as not to repeat it without asking.
   */
  history(taskId: string, callId: string): Promise<CallHistory>;
  /** Lets go of connections (MCP servers). */
  close?(): Promise<void>;
}

/**
 * One tool's implementation, whatever it is bound to: it says what it is, checks arguments before
 * anything runs, and runs. The tool service around it adds timeouts, large results and the audit.
 */
export interface ToolBinding {
  readonly descriptor: ToolDescriptor;
  /** The problems with these arguments, each naming its field; none when they are valid. */
  check(args: Record<string, unknown>): string[];
  /** Runs with valid arguments; throws when the tool fails (the message is shown to the model). */
  run(args: Record<string, unknown>, context: ToolContext): Promise<string>;
}
