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
  signal?: AbortSignal;
}

export interface ToolResult {
  content: string;
  isError?: boolean;
}

export interface ToolDescriptor extends LlmToolSpec {
  /** Risky tools run only after a person confirms the exact arguments. */
  risky: boolean;
  /**
   * The tool does nothing outside Arbor (a function of its arguments): running it again after a
   * crash changes nothing anyone can see, so it need not wait for what led to it to be on disk.
   */
  pure: boolean;
}

export interface ToolPort {
  /** Descriptors of the named tools that exist (unknown names are left out); they may be frozen. */
  describe(names: readonly string[]): ToolDescriptor[];
  execute(name: string, args: Record<string, unknown>, context: ToolContext): Promise<ToolResult>;
}
