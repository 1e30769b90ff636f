import { describe, expect, it } from "vitest";
import { cardAction } from "../../../../../shared/channels/chat/teams/invoke.ts";
import type { InteractionResource } from "../../../../../shared/domain/resources.ts";
import type { Engine } from "../../../../../shared/engine/engine.ts";
import { ValidationError } from "../../../../../shared/kernel/errors.ts";

/**
 * How a card's Action.Execute becomes engine.respond: a button's option, a choice set's `choice`,
 * a text input's `value`; an answer the engine finds unfit is an error response, nothing else.
 */
const URN = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.t/uip.Interaction.q";
const who = { actor: { id: "user_ada", kind: "human" as const }, tenant: "acme", roles: [] };

function engineRecording(fail?: Error) {
  const calls: unknown[][] = [];
  const interaction = {
    meta: { id: URN },
    kind: "input",
    purpose: "request_info",
    display: { title: "How many seats?" },
    validation: { regex: "^[0-9]+$", required: true },
    status: "answered",
    response: { actor: "user_ada", inputValue: "12" },
  } as unknown as InteractionResource;
  const engine = {
    respond: async (...args: unknown[]) => {
      calls.push(args);
      if (fail) throw fail;
    },
    mayRead: async () => true,
    deps: { resources: { getAs: async () => interaction } },
  } as unknown as Engine;
  return { engine, calls };
}

const action = (data: Record<string, unknown>, verb = "arbor.answer") => ({
  action: { type: "Action.Execute", verb, data },
});

describe("Teams card actions", () => {
  it("answers a button with its option, a choice set with its choice, a text input with its value", async () => {
    const { engine, calls } = engineRecording();
    await cardAction(engine, who, action({ interaction: URN, option: "approve" }));
    await cardAction(engine, who, action({ interaction: URN, choice: "mailer" }));
    const body = await cardAction(engine, who, action({ interaction: URN, value: "12" }));
    expect(calls.map((c) => c[1])).toEqual([
      { selectedOptionId: "approve" },
      { selectedOptionId: "mailer" },
      { inputValue: "12" },
    ]);
    expect(calls[0]?.[2]).toEqual(who.actor);
    expect(calls[0]?.[3]).toEqual({ tenant: "acme", roles: [] });
    expect(JSON.stringify(body)).toContain("Answered by **user_ada**: 12");
  });

  it("turns an answer the engine finds unfit into an error response", async () => {
    const { engine } = engineRecording(
      new ValidationError('That answer does not fit "How many seats?"', ["input must match ^[0-9]+$"]),
    );
    const body = await cardAction(engine, who, action({ interaction: URN, value: "a dozen" }));
    expect(body).toMatchObject({ statusCode: 400, type: "application/vnd.microsoft.error" });
    expect(JSON.stringify(body)).toContain("input must match");
  });

  it("refuses actions it does not know and data that names no question, without calling the engine", async () => {
    const { engine, calls } = engineRecording();
    expect((await cardAction(engine, who, action({ interaction: URN }, "arbor.drop"))).statusCode).toBe(400);
    expect((await cardAction(engine, who, action({ option: "approve" }))).statusCode).toBe(400);
    expect(
      (await cardAction(engine, who, action({ interaction: "cld:common.Tenant.acme/plan.Task.t" })))
        .statusCode,
    ).toBe(400);
    expect((await cardAction(engine, who, undefined)).statusCode).toBe(400);
    expect(calls).toEqual([]);
  });
});
