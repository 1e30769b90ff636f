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
  /**
   * Given by a caller that can take a pending result (ToolResult.pending) and settle it later (the
   * engine's inner loop): only then may a remote A2A agent be asked to push instead of being waited
   * on. A binding calls it before it sends the push configuration, so that the callback is on
   * record before the agent can use it (a push may come before the send has its answer).
   */
  handOff?: (callback: { callbackId: string; tokenHash: string }) => Promise<void>;
  /**
   * A callback the caller made and put on record already (through its own handOff), for a tool
   * that runs elsewhere: the tool function on AWS, which cannot record one (ToolFunctionPort makes it
   * in the turn step and sends it with the call). A binding that hands off uses it instead of
   * making its own, and calls no handOff for it.
   */
  callback?: GivenCallback;
  /**
   * Set by the engine for a call to an activity (ToolDescriptor.activity): the whole call with
   * its meta-properties and the messages the task scoped in. An activity's handler gets them as
   * `(call, tool, context)` (tools/activities/activities.ts).
   */
  activity?: ActivityInvocation;
  /**
   * What must be on record before the call takes effect: the engine's turn that asks for it, whose
   * write goes on beside the call's first reads (its history, its policy). Awaited before anything
   * of the call is recorded or run; its failure is the call's (the call does not start).
   */
  after?: Promise<unknown>;
}

/**
 * A call as an activity sees it: its own arguments (checked against the tool's schema) and the
 * meta-properties the engine took off them before the check.
 */
export interface ActivityCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  /** As the model wrote it, e.g. `state.sunny || state.rainy`. */
  _outputPath?: string | undefined;
  /** The model's own name for this call (free text), if it gave one. */
  _instance?: string | undefined;
  /** The alternatives of `_outputPath`, parsed (one: a plain path; several: the activity picks one). */
  outputPaths?: string[] | undefined;
}

/** A message the task scoped in for an activity: its prompt and transcript up to the call. */
export interface ScopedMessage {
  role: "user" | "assistant" | "tool";
  content: string;
  /** The message's URN. */
  urn?: string | undefined;
}

export interface ActivityInvocation {
  call: ActivityCall;
  context: ScopedMessage[];
}

/** A callback made and recorded by the caller (ToolContext.callback): the push comes to `url`. */
export interface GivenCallback {
  callbackId: string;
  /** The bearer token the push must carry (the record keeps only its hash). */
  token: string;
  /** `<public URL>/v1/a2a-callbacks/<callbackId>`. */
  url: string;
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
  /**
   * The call was handed to a remote agent that will say when it is done (an A2A push): it has no
   * outcome yet, and nothing waits for it. The engine keeps it (engine/turn/remote-calls.ts) and
   * settles it with `settle` when the push comes, or at its deadline.
   */
  pending?: PendingCall;
}

/** A call out on a remote agent, waiting for its push (see ToolResult.pending). */
export interface PendingCall {
  /** Opaque; the push comes to `<public URL>/v1/a2a-callbacks/<callbackId>`. */
  callbackId: string;
  /** sha256 (hex) of the bearer token the push must carry; the token itself is kept nowhere. */
  tokenHash: string;
  /** The remote agent's task id. */
  remoteTaskId: string;
  /** ISO 8601: when the call would have timed out; then the remote is asked once. */
  deadline: string;
  /** The attempt of the call that is out, and the hash of its arguments (its audit records carry them). */
  attempt: number;
  argumentsHash: string;
}

/**
 * What a binding returns instead of text when the remote agent will push its answer (see
 * ToolResult.pending); the tool service adds the deadline and the attempt.
 */
export interface RemoteTaskHandedOff {
  kind: "remote-task-handed-off";
  callbackId: string;
  tokenHash: string;
  remoteTaskId: string;
}

export const isHandedOff = (v: unknown): v is RemoteTaskHandedOff =>
  typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "remote-task-handed-off";

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
  /** What ListTools filters by (tools/service/config.ts NAMESPACE): the entry's own, else its kind. */
  namespace?: string | undefined;
  /**
   * An activity (seed 004): its handler gets `(call, tool, context)`; a call with `_outputPath`
   * is awaited and its result stored in the task's state (the activity may choose among
   * `a || b`), a call without one is fire-and-forget. Absent: an ordinary tool.
   */
  activity?: boolean | undefined;
  /** The JSON Schema of what the tool returns, when it declares one (an activity's `_output`). */
  outputSchema?: Record<string, unknown> | undefined;
  /**
   * Not run by a tool service at all: the engine's step handles the call itself (`ask_person`: it
   * asks a person and the task waits, see engine/turn/ask.ts), on every runtime.
   */
  engine?: "ask_person" | undefined;
}

/** What registering a tenant's Tool resources did (ToolPort.register). */
export interface ToolRegistration {
  /** Tool names whose resource was written (new or changed), and deleted (no longer configured). */
  written: string[];
  deleted: string[];
  /** The hash of the registered set: the tenant's resources are this configuration's. */
  registryHash: string;
  /** The URNs of the tenant's Tool resources, in the configuration's order. */
  urns: string[];
}

export interface ToolPort {
  /**
   * The tools this process knows (the configuration it started with; on AWS the tool function's
   * ListTools at cold start): what the engine checks team files and model turns against, from
   * memory. ListTools for a tenant is `listTools`, read from its stored Tool resources.
   */
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
  /**
   * Settles a pending call (ToolResult.pending) of tool `name`: with the remote's pushed body, or,
   * without one (its deadline passed), by asking the remote once. Records the attempt's outcome;
   * never throws for the call's own failures. `undefined` when the push says the call is still
   * running (nothing is recorded).
   */
  settle?(
    name: string,
    pending: PendingCall,
    pushed: unknown,
    context: ToolContext,
  ): Promise<ToolResult | undefined>;
  /**
   * ListTools (seeds/001): the tenant's stored Tool resources (`cld:common.Tenant.<t>/common.Tool.*`),
   * of one namespace or all, by name. The tenant's resources are registered from the configuration
   * first when they are not this configuration's. A namespace that is not one (tools/service/config.ts
   * NAMESPACE) is a ValidationError.
   */
  listTools?(tenant: string, options?: { namespace?: string }): Promise<ToolDescriptor[]>;
  /**
   * Makes the tenant's Tool resources the configuration's: writes what is new or changed, deletes
   * what is no longer configured, nothing when they already are. Idempotent, safe to race.
   */
  register?(tenant: string): Promise<ToolRegistration>;
  /**
   * Resolves once `list`, `describe` and `check` answer from the tools' list: a port that reads it
   * in the background (the API function's, so that its cold start waits on no other function) is
   * awaited so before its list decides anything (a team checked against it). Absent: always ready.
   */
  ready?(): Promise<void>;
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
  /**
   * Runs with valid arguments; throws when the tool fails (the message is shown to the model). A
   * remote A2A agent that will push its answer gives a RemoteTaskHandedOff instead of text.
   */
  run(args: Record<string, unknown>, context: ToolContext): Promise<string | RemoteTaskHandedOff>;
  /**
   * The answer of a call that was handed off: from the pushed body, or (none) by asking the remote.
   * Throws when the remote task failed or the body is not a task of it (a BadRequest-like Error);
   * `undefined` while it is still running.
   */
  settle?(remoteTaskId: string, pushed: unknown, signal: AbortSignal): Promise<string | undefined>;
}
