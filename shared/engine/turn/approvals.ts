import { argumentsHash } from "../../domain/events.ts";
import type { ToolCall } from "../../domain/resources.ts";
import type { CallHistory, ToolResult } from "../../ports/tools.ts";
import type { EngineDeps } from "../context.ts";
import { announceStored, interactionMeta, requestInteraction } from "../interactions.ts";

/**
 * Approvals of risky calls. A risky call runs only after a person approves its exact arguments
 * (bound by their hash), and an approval covers ONE execution: when the audit log shows that the
 * call was started before (a crash or a restart interrupted it, so its outcome is unknown, or its
 * result was lost before it was kept), it does not run again on the old approval. The person is
 * asked again, told what is known of the earlier attempt (unknown, completed, failed) and what the
 * tool got (the arguments and the call's idempotency key, which a repeat carries too), and only a
 * new approval runs it. Each further attempt needs its own (`<name>-attempt-<n>`).
 *
 * A call that is not risky is run again after a crash without asking, with the same idempotency
 * key: a tool that honours the key recognises the repeat. A call still running in this process
 * (its step was driven again while the call is out) is not a repeat: the tool service joins it.
 */
export type Approval = "approved" | "waiting" | ToolResult;

export async function approval(
  deps: EngineDeps,
  taskId: string,
  name: string,
  call: ToolCall,
): Promise<Approval> {
  const first = await confirmation(deps, taskId, name, call);
  if (first !== "approved")
    return first === "waiting"
      ? first
      : {
          content: `A person declined to run ${call.name} with these arguments. Do not retry it; finish without it.`,
          isError: true,
        };
  const history = await deps.tools.history(taskId, call.id);
  // Never run before; or running now in this process, where running it again joins that attempt.
  if (history.attempts === 0 || history.running) return "approved";
  const again = await confirmation(deps, taskId, `${name}-attempt-${history.attempts + 1}`, call, history);
  if (again !== "denied") return again;
  return {
    content: `A person declined to run ${call.name} again. Its earlier attempt ${
      history.last === "unknown" ? "may or may not have taken effect (its outcome is unknown)" : "was lost"
    }: do not retry it; finish without it, and say so.`,
    isError: true,
  };
}

/** Asks (once per name) and reads the answer: approved only for these exact arguments. */
async function confirmation(
  deps: EngineDeps,
  taskId: string,
  name: string,
  call: ToolCall,
  earlier?: CallHistory,
): Promise<"approved" | "denied" | "waiting"> {
  const boundTo = argumentsHash(call.arguments);
  const existing = await deps.resources.getAs("uip.Interaction", interactionMeta(taskId, name).id);
  if (!existing) {
    await requestInteraction(deps, taskId, name, {
      kind: "confirm",
      purpose: "confirm_risky_action",
      display: earlier
        ? askAgain(call, earlier)
        : {
            title: `Allow ${call.name}?`,
            description: "The assistant wants to run this tool with exactly these arguments.",
            content: call.arguments,
            contentKind: "Json",
          },
      options: [
        { id: "approve", label: earlier ? "Run it again" : "Allow", style: "primary" },
        { id: "deny", label: "Deny", style: "danger" },
      ],
      binding: { tool: call.name, argumentsHash: boundTo },
    });
    return "waiting";
  }
  if (existing.status === "pending") {
    await announceStored(deps, existing); // in case a crash came before the task waited
    return "waiting";
  }
  if (existing.status !== "answered") return "waiting";
  const bound = existing.binding?.tool === call.name && existing.binding.argumentsHash === boundTo;
  return bound && existing.response?.selectedOptionId === "approve" ? "approved" : "denied";
}

/** What a person is shown before a call that was started already is run again. */
function askAgain(call: ToolCall, earlier: CallHistory) {
  const n = earlier.attempts;
  const at = earlier.lastAt ? ` at ${earlier.lastAt}` : "";
  const before =
    earlier.last === "completed"
      ? `Attempt ${n} of ${call.name} completed${at}, but Arbor stopped before it kept the result: running it again does it a second time.`
      : earlier.last === "failed"
        ? `Attempt ${n} of ${call.name} failed${at}, and Arbor stopped before the assistant saw why: it may have done part of it.`
        : `The outcome of attempt ${n} of ${call.name} is unknown: it was started${at} and Arbor stopped (a crash or a restart) before it recorded an outcome, so it may or may not have taken effect.`;
  return {
    title: `Run ${call.name} again? ${
      earlier.last === "unknown" || earlier.last === undefined
        ? `The outcome of attempt ${n} is unknown`
        : `Attempt ${n} ${earlier.last}, its result was lost`
    }`,
    description:
      `${before} It got exactly these arguments and the idempotency key ${earlier.idempotencyKey} ` +
      "(an HTTP tool as its Idempotency-Key header); attempt " +
      `${n + 1} would get the same, and a tool that honours the key does not act twice. ` +
      (earlier.last === "completed"
        ? "Run it again only if doing it twice is what you want, or the tool honours the key."
        : "Run it again only if you know it did not happen, or that the tool honours the key."),
    content: {
      arguments: call.arguments,
      idempotencyKey: earlier.idempotencyKey,
      attempt: n + 1,
      earlier: {
        attempt: n,
        outcome: earlier.last ?? "unknown",
        ...(earlier.lastAt ? { at: earlier.lastAt } : {}),
      },
    },
    contentKind: "Json" as const,
  };
}
