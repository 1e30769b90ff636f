import { TaskState } from "@a2a-js/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { questionBlocks } from "../../shared/channels/chat/slack/blocks.ts";
import { questionCard } from "../../shared/channels/chat/teams/cards.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { questionOf } from "../../shared/notify/chat/snapshot.ts";
import { buttonClick, buttonsOf, type FakeMessage, interactivityForm } from "../peers/fake-slack.ts";
import { a2aClient, ada, rootOf, send, serveA2a, userMessage } from "./a2a-fixtures.ts";
import { askingScript, CLERK, COLOUR_QUESTION, DATE_QUESTION } from "./ask-fixture.ts";
import { Harness } from "./engine-harness.ts";
import { type SlackWorld, startSlackWorld, TEAM } from "./slack-world.ts";
import { ADA, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * A question an assistant asks (`ask_person`), answered from each chat channel: Slack (a modal with
 * a choice and a text), Teams (a card with Input.ChoiceSet and Input.Text), A2A (input-required,
 * answered with a text). Each answer resumes the leaf, and its output uses the answer.
 */
let slack: SlackWorld | undefined;
let teams: TeamsWorld | undefined;
let h: Harness | undefined;
let a2a: Awaited<ReturnType<typeof serveA2a>> | undefined;
afterEach(async () => {
  await slack?.close();
  await stopTeamsWorld(teams);
  await a2a?.close();
  await h?.close();
  slack = teams = h = a2a = undefined;
});

describe("ask_person answered from Slack", () => {
  it("a composite question: the modal offers a choice and a text, refuses both, and takes one", async () => {
    slack = await startSlackWorld({ script: askingScript(COLOUR_QUESTION), assistants: CLERK });
    const w = slack;
    const { rootTaskId } = await w.h.submit("Book the offsite");
    await w.h.idle();
    const [q] = (await w.h.pending(rootTaskId)) as InteractionResource[];
    expect(q?.kind).toBe("composite");
    const question = questionOf(q as InteractionResource);
    const message: FakeMessage = {
      channel: "C1",
      ts: "1780000000.000200",
      threadTs: "1780000000.000100",
      text: question.display.title,
      blocks: questionBlocks(question, {
        rootTaskUrn: rootTaskId,
        conversationUrn: rootTaskId.split("/").slice(0, 2).join("/"),
        title: "Offsite",
        state: "input-required",
        tasks: [],
        taskCount: 1,
        truncated: false,
        questions: [],
        at: new Date().toISOString(),
      }).payload.blocks as unknown[],
      history: [],
    };
    const button = buttonsOf(message).find((b) => b.text === "Answer…");
    expect(button).toBeDefined();
    await w.post(
      "/slack/interactivity",
      interactivityForm(
        buttonClick({ team: TEAM, user: "U_ADA", channel: "C1", message, button: button as never }),
      ),
    );
    const view = w.fake.calls("views.open").at(-1)?.args.view as {
      private_metadata: string;
      blocks: { block_id?: string; optional?: boolean; label?: { text: string } }[];
    };
    // Both fields, both optional: the person fills one.
    expect(
      view.blocks.filter((b) => b.block_id?.startsWith("arbor.")).map((b) => [b.block_id, b.optional]),
    ).toEqual([
      ["arbor.choice", true],
      ["arbor.value", true],
    ]);
    const submit = (values: Record<string, unknown>) =>
      w.post(
        "/slack/interactivity",
        interactivityForm({
          type: "view_submission",
          team: { id: TEAM },
          user: { id: "U_ADA", team_id: TEAM },
          view: { callback_id: "arbor.answer", private_metadata: view.private_metadata, state: { values } },
        }),
      );
    const choice = {
      "arbor.choice": { choice: { type: "static_select", selected_option: { value: "option-3" } } },
    };
    const text = (value: string) => ({ "arbor.value": { value: { type: "plain_text_input", value } } });
    expect(await (await submit({ ...choice, ...text("Teal") })).json()).toEqual({
      response_action: "errors",
      errors: { "arbor.value": "Choose an option or write your own answer, not both" },
    });
    expect(await (await submit({})).json()).toMatchObject({ response_action: "errors" });
    expect(await (await submit(text("Teal 42"))).json()).toEqual({
      response_action: "errors",
      errors: { "arbor.value": "Must match ^[A-Za-z ]+$" },
    });
    expect((await w.h.engine.deps.resources.getAs("uip.Interaction", q?.meta.id as string))?.status).toBe(
      "pending",
    );
    expect((await submit(choice)).status).toBe(200);
    await w.h.idle();
    expect((await w.h.engine.result(rootTaskId)).output).toBe("booked: Green (told by user_ada)");
  });
});

describe("ask_person answered from Teams", () => {
  it("an input question: the card has Input.Text with the regex; a wrong value is refused, a right one resumes", async () => {
    teams = await startTeamsWorld({ script: askingScript(DATE_QUESTION), assistants: CLERK });
    const w = teams;
    const { rootTaskId } = await w.h.submit("Book the offsite");
    await w.h.idle();
    const [q] = (await w.h.pending(rootTaskId)) as InteractionResource[];
    const card = questionCard(questionOf(q as InteractionResource)) as { body: Record<string, unknown>[] };
    expect(card.body.find((b) => b.type === "Input.Text")).toMatchObject({
      id: "value",
      isRequired: true,
      regex: DATE_QUESTION.validation.regex,
    });
    const invoke = async (data: Record<string, unknown>) => {
      const res = await w.send(w.invoke({ interaction: q?.meta.id, ...data }, { from: ADA }));
      return (await res.json()) as { statusCode: number; value: { message?: string } };
    };
    const wrong = await invoke({ value: "soon" });
    expect(wrong.statusCode).toBe(400);
    expect((await w.h.engine.deps.resources.getAs("uip.Interaction", q?.meta.id as string))?.status).toBe(
      "pending",
    );
    expect((await invoke({ value: "2026-09-09" })).statusCode).toBe(200);
    await w.h.idle();
    expect((await w.h.engine.result(rootTaskId)).output).toBe("booked: 2026-09-09 (told by user_ada)");
  });

  it("a composite question's card has a choice set and a text, neither required", () => {
    const card = questionCard({
      urn: "cld:common.Tenant.acme/x/uip.Interaction.q",
      kind: "composite",
      purpose: "request_info",
      display: { title: "Colour?" },
      options: [
        { id: "option-1", label: "Red" },
        { id: "option-2", label: "Blue" },
      ],
      validation: { regex: "^[a-z]+$" },
    }) as { body: Record<string, unknown>[] };
    const inputs = card.body.filter((b) => String(b.type).startsWith("Input."));
    expect(inputs).toMatchObject([
      { type: "Input.ChoiceSet", id: "choice", isRequired: false },
      { type: "Input.Text", id: "value", isRequired: false, regex: "^[a-z]+$" },
    ]);
  });
});

describe("ask_person answered over A2A", () => {
  it("input-required shows the question; a text answer resumes the leaf", async () => {
    h = await Harness.create({
      script: askingScript(COLOUR_QUESTION),
      assistants: CLERK,
      settings: { electionThreshold: -1 },
    });
    a2a = await serveA2a(h.engine);
    // A person over A2A (the policy lets no agent answer a question, not even one it started).
    const c = await a2aClient(ada.key, a2a.url);
    const waiting = await send(c, userMessage("Book the offsite"));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const shown = JSON.stringify(waiting.status?.message?.parts);
    expect(shown).toContain("or with an answer of your own matching ^[A-Za-z ]+$");
    expect(shown).toContain('"kind":"composite"');
    const done = await send(c, userMessage("Teal", { taskId: waiting.id, contextId: waiting.contextId }));
    await h.idle();
    expect((await h.engine.result(rootOf(waiting))).output).toBe("booked: Teal (told by user_ada)");
    expect([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_WORKING]).toContain(done.status?.state);
  });
});
