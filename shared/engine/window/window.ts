import { wholeCharacters } from "../../domain/text.ts";
import type { LlmMessage, LlmToolCall, LlmToolSpec } from "../../ports/llm.ts";

/**
 * The context window of a leaf's inner loop: which of its stored turns the next model request
 * carries, within a token budget. A pure function of the transcript, so the same transcript (and
 * mark, and budget) always gives the same request: a step re-driven after a crash sends what the
 * first attempt sent.
 *
 *   buildWindow({ system, prompt, tools, turns, fromTurn: 1, budget: 28_000, count })
 *     -> { messages, tokens, whole, stubbed, dropped, cleared }
 *
 * The rules, in order:
 * 1. The system prompt, the tools' schemas and the task's prompt are always sent (they are counted
 *    first; the prompt was built to a quarter of the window, buildPrompt in turn/direct.ts).
 * 2. Turns before `fromTurn` (a person truncated or cleared the conversation, window-marks.ts) are
 *    not sent.
 * 3. The newest turns are sent whole, newest first, while they fit in WHOLE_SHARE (3/4) of the room
 *    left after rule 1, so that older turns keep a place as stubs. The newest turn is always
 *    sent: if it alone does not fit, each of its tool results is cut to an equal share of what is
 *    left (its start, and where to read the rest).
 * 4. From the first turn that does not fit so, older turns are sent with their tool results
 *    replaced by a stub (the tool's name, the result's size, and the Message URN to read it with
 *    `read_resource`; a result shorter than its stub stays) and their call arguments longer than
 *    STUB_ARGUMENTS_TOKENS replaced likewise, while they fit.
 * 5. From the first turn that does not fit even so, it and every older turn are left out whole,
 *    and one message after the prompt says how many turns are left out and why.
 * A turn's tool calls and their results stay together: a turn is sent (whole or stubbed) or left
 * out as one, and a call whose result is missing is answered with a stub that says so, since
 * Bedrock and OpenAI refuse a tool call without its result.
 *
 * What is counted (requestTokens): each message's text, each tool call's name and JSON arguments,
 * each tool result's text and call id, the system prompt, the tools' names, descriptions and JSON
 * schemas, plus MESSAGE_OVERHEAD tokens per message and per tool call for the provider's framing.
 */

export interface WindowResult {
  /** The result Message's URN (where `read_resource` reads it). */
  urn: string;
  toolCallId: string;
  content: string;
  isError?: boolean;
}

export interface WindowTurn {
  /** The turn's number (1, 2, ...). */
  n: number;
  /** The assistant Message's URN. */
  urn: string;
  content?: string;
  toolCalls?: LlmToolCall[];
  /** One per tool call, in order; undefined when none is stored. */
  results: (WindowResult | undefined)[];
}

export interface WindowInput {
  system: string;
  prompt: string;
  tools: readonly LlmToolSpec[];
  /** Oldest first. */
  turns: readonly WindowTurn[];
  /** The first turn that may be sent (turns before it were truncated or cleared); 1: all. */
  fromTurn: number;
  /** Tokens the request may take (the window less room for the answer). */
  budget: number;
  count: (text: string) => number;
}

export interface Window {
  messages: LlmMessage[];
  /** requestTokens of the request this window makes. */
  tokens: number;
  /** Turns sent whole, with stubbed results, and left out to fit; turns not sent because of the mark. */
  whole: number;
  stubbed: number;
  dropped: number;
  cleared: number;
}

export const MESSAGE_OVERHEAD = 4;
/** The share of the room (after the fixed part) whole turns may take; the newest is whole regardless. */
export const WHOLE_SHARE = 0.75;
/** Call arguments longer than this (in tokens) are replaced by a stub in a stubbed turn. */
export const STUB_ARGUMENTS_TOKENS = 200;

/** The tokens of a request as the window counts them. */
export function requestTokens(
  count: (text: string) => number,
  request: { system?: string; messages: readonly LlmMessage[]; tools?: readonly LlmToolSpec[] },
): number {
  let sum = request.system ? count(request.system) + MESSAGE_OVERHEAD : 0;
  for (const t of request.tools ?? [])
    sum += count(t.name) + count(t.description) + count(JSON.stringify(t.parameters)) + MESSAGE_OVERHEAD;
  for (const m of request.messages) sum += messageTokens(count, m);
  return sum;
}

export function messageTokens(count: (text: string) => number, m: LlmMessage): number {
  let sum = MESSAGE_OVERHEAD + (m.content ? count(m.content) : 0);
  if (m.role === "assistant")
    for (const c of m.toolCalls ?? [])
      sum += MESSAGE_OVERHEAD + count(c.id) + count(c.name) + count(JSON.stringify(c.arguments));
  if (m.role === "tool") sum += count(m.toolCallId);
  return sum;
}

export function buildWindow(input: WindowInput): Window {
  const { count } = input;
  const cost = (ms: readonly LlmMessage[]) => ms.reduce((s, m) => s + messageTokens(count, m), 0);
  const prompt: LlmMessage = { role: "user", content: input.prompt };
  const fixed = requestTokens(count, { system: input.system, messages: [prompt], tools: input.tools });
  const sendable = input.turns.filter((t) => t.n >= input.fromTurn);
  const cleared = input.turns.length - sendable.length;

  const chosen: LlmMessage[][] = []; // newest first
  // Room for the note, counted at its longest (as if every turn were left out), when one may be needed.
  const note: LlmMessage = { role: "user", content: markerText(sendable.length, cleared) };
  let left = input.budget - fixed - (sendable.length > 1 || cleared > 0 ? messageTokens(count, note) : 0);
  // Whole turns take at most WHOLE_SHARE of the room; stubbed older turns may fill the rest.
  let wholeRoom = Math.floor(left * WHOLE_SHARE);
  let mode: "whole" | "stub" = "whole";
  let whole = 0;
  let stubbed = 0;
  for (let i = sendable.length - 1; i >= 0; i--) {
    const turn = sendable[i] as WindowTurn;
    if (i === sendable.length - 1) {
      const full = turnMessages(turn, "whole");
      const messages = cost(full) <= left ? full : cutToFit(turn, left, count);
      chosen.push(messages);
      left -= cost(messages);
      wholeRoom -= cost(messages);
      whole++;
      continue;
    }
    if (mode === "whole") {
      const full = turnMessages(turn, "whole");
      const c = cost(full);
      if (c <= left && c <= wholeRoom) {
        chosen.push(full);
        left -= c;
        wholeRoom -= c;
        whole++;
        continue;
      }
      mode = "stub";
    }
    const stub = turnMessages(turn, "stub", count);
    const c = cost(stub);
    if (c > left) break;
    chosen.push(stub);
    left -= c;
    stubbed++;
  }
  const dropped = sendable.length - whole - stubbed;
  const messages: LlmMessage[] = [prompt];
  if (dropped + cleared > 0) messages.push({ role: "user", content: markerText(dropped, cleared) });
  for (const m of chosen.reverse()) messages.push(...m);
  return {
    messages,
    tokens: requestTokens(count, { system: input.system, messages, tools: input.tools }),
    whole,
    stubbed,
    dropped,
    cleared,
  };
}

function markerText(dropped: number, cleared: number): string {
  const parts: string[] = [];
  if (dropped > 0)
    parts.push(
      `${dropped} earlier turn${dropped === 1 ? " is" : "s are"} left out to fit the context window ` +
        "(their messages are stored under this task and readable with read_resource)",
    );
  if (cleared > 0)
    parts.push(
      `${cleared} earlier turn${cleared === 1 ? " was" : "s were"} removed from this conversation on request`,
    );
  return `[Context note: ${parts.join("; ")}.]`;
}

function turnMessages(
  turn: WindowTurn,
  mode: "whole" | "stub",
  count?: (text: string) => number,
): LlmMessage[] {
  const calls = turn.toolCalls ?? [];
  const shownCalls =
    mode === "stub" && count
      ? calls.map((c) => {
          const json = JSON.stringify(c.arguments);
          return count(json) <= STUB_ARGUMENTS_TOKENS
            ? c
            : { ...c, arguments: { omitted: `${json.length} characters of arguments; read ${turn.urn}` } };
        })
      : calls;
  const out: LlmMessage[] = [
    {
      role: "assistant",
      ...(turn.content ? { content: turn.content } : {}),
      ...(shownCalls.length ? { toolCalls: shownCalls } : {}),
    },
  ];
  // An assistant message needs content or calls (a stored turn always has calls).
  if (!turn.content && !shownCalls.length) out[0] = { role: "assistant", content: "(no content)" };
  for (const [k, call] of calls.entries()) {
    const r = turn.results[k];
    if (!r) {
      out.push({
        role: "tool",
        toolCallId: call.id,
        content: "[no result was recorded for this call]",
        isError: true,
      });
      continue;
    }
    // A stub replaces a result only when it is the shorter of the two.
    const stub = mode === "stub" ? stubText(call.name, r) : r.content;
    const content = stub.length < r.content.length ? stub : r.content;
    out.push({ role: "tool", toolCallId: r.toolCallId, content, ...(r.isError ? { isError: true } : {}) });
  }
  return out;
}

function stubText(tool: string, r: WindowResult): string {
  return (
    `[${r.isError ? "error " : ""}result of ${tool} left out to fit the context window: ` +
    `${r.content.length} characters; read it with read_resource, urn ${r.urn}]`
  );
}

/** The newest turn, its results cut to equal shares of `left` (their starts, and where to read on). */
function cutToFit(turn: WindowTurn, left: number, count: (text: string) => number): LlmMessage[] {
  const base = turnMessages(
    { ...turn, results: turn.results.map((r) => r && { ...r, content: "" }) },
    "whole",
  );
  const results = turn.results.filter((r): r is WindowResult => r !== undefined);
  const share = Math.max(0, Math.floor((left - costOf(base, count)) / Math.max(1, results.length)));
  const cut = new Map(results.map((r) => [r.toolCallId, cutText(r, share, count)]));
  return base.map((m) =>
    m.role === "tool" && cut.has(m.toolCallId) ? { ...m, content: cut.get(m.toolCallId) as string } : m,
  );
}

const costOf = (ms: readonly LlmMessage[], count: (text: string) => number) =>
  ms.reduce((s, m) => s + messageTokens(count, m), 0);

function cutText(r: WindowResult, tokens: number, count: (text: string) => number): string {
  if (count(r.content) <= tokens) return r.content;
  const note = (kept: number) =>
    `\n[cut to fit the context window: ${kept} of ${r.content.length} characters shown; read the rest with read_resource, urn ${r.urn}, offset ${kept}]`;
  // Shrink the kept start until it and the note fit (deterministic: the same inputs, the same cut).
  let kept = Math.min(r.content.length, Math.max(0, tokens * 2));
  kept = wholeCharacters(r.content, kept);
  while (kept > 0 && count(r.content.slice(0, kept) + note(kept)) > tokens)
    kept = wholeCharacters(r.content, Math.floor(kept * 0.8));
  return r.content.slice(0, kept) + note(kept);
}
