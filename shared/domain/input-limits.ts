import { ValidationError } from "../kernel/errors.ts";

/**
 * The limits every channel keeps for what a caller sends (the HTTP API, A2A, and whatever comes
 * next), defined once. A channel checks them before it writes anything, and the engine's submit
 * checks the request text again before its first write, so no channel can skip them.
 */

/** The most characters a request's text may have, once a channel has rendered its parts as text. */
export const MAX_REQUEST_CHARS = 100_000;

/** The deepest any JSON a caller sends may nest (objects and arrays, the outermost counted as 1). */
export const MAX_JSON_DEPTH = 64;

/** The most parts one message may have (A2A). */
export const MAX_MESSAGE_PARTS = 100;

/**
 * True when `value` nests deeper than `max`. Walks with its own stack (no recursion), so a body
 * nested 100,000 levels is measured, not a stack overflow; stops as soon as it knows.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== "object" || node === null) continue;
    if (depth > max) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node))
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}

/** Why a request's text cannot be taken (empty, or over MAX_REQUEST_CHARS), or undefined. */
export function requestTextProblem(text: string): string | undefined {
  if (text.trim() === "") return "The request has no text";
  if (text.length > MAX_REQUEST_CHARS)
    return `The request is ${text.length} characters long (its parts rendered as text); at most ${MAX_REQUEST_CHARS} are taken`;
  return undefined;
}

/** Throws ValidationError unless `text` is a request's text within the limits. */
export function checkRequestText(text: string): void {
  const problem = requestTextProblem(text);
  if (problem) throw new ValidationError(problem);
}
