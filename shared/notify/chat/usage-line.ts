import { costText } from "../../domain/budgets.ts";
import type { ThreadSnapshot } from "./types.ts";

/** A request's tokens and cost as a thread shows them: "3,381 tokens · $0.0042" (or "cost unknown"). */
export function usageLine(usage: NonNullable<ThreadSnapshot["usage"]>): string {
  return `${usage.tokens.toLocaleString("en-US")} tokens · ${costText(usage)}`;
}
