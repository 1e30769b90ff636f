import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { questionBlocks } from "../../shared/channels/chat/slack/blocks.ts";
import type { InteractionResource } from "../../shared/domain/resources.ts";
import { requestInteraction } from "../../shared/engine/interactions.ts";
import { questionOf } from "../../shared/notify/chat/snapshot.ts";
import type { ThreadQuestion, ThreadSnapshot } from "../../shared/notify/chat/types.ts";
import { buttonClick, buttonsOf, type FakeMessage, interactivityForm } from "../peers/fake-slack.ts";
import { PERSON } from "./engine-harness.ts";
import { until } from "./notify-fixture.ts";
import { GENERALIST } from "./scenarios.ts";
import { oneVenue, type SlackWorld, startSlackWorld, TEAM } from "./slack-world.ts";

/**
 * Answering in Slack: the buttons and modals of a question, clicked by the person who asked, by
 * someone the policy refuses, and submitted with values the question's validation refuses. The
 * question's message is rendered here as the surface renders it (the thread sync posts it in the
 * flows test); each click goes through the real route, signed as Slack signs it.
 */
let w: SlackWorld;
beforeEach(async () => {
  w = await startSlackWorld({ script: oneVenue, assistants: GENERALIST });
});
afterEach(async () => w?.close());

const snapshotOf = (root: string): ThreadSnapshot => ({
  rootTaskUrn: root,
  conversationUrn: root.split("/").slice(0, 2).join("/"),
  title: "Offsite",
  state: "input-required",
  tasks: [],
  taskCount: 1,
  truncated: false,
  questions: [],
  at: new Date().toISOString(),
});
/** The question's message as Slack holds it once posted in thread 1780000000.000100 of C1. */
const posted = (q: ThreadQuestion, root: string): FakeMessage => ({
  channel: "C1",
  ts: "1780000000.000200",
  threadTs: "1780000000.000100",
  text: q.display.title,
  blocks: questionBlocks(q, snapshotOf(root)).payload.blocks as unknown[],
  history: [],
});

async function lazyRequest() {
  const { rootTaskId } = await w.h.submit("Plan the offsite", "lazy");
  await w.h.idle();
  const [approval] = await w.h.pending(rootTaskId);
  if (!approval) throw new Error("expected the plan's approval");
  return { rootTaskId, approval, message: posted(questionOf(approval), rootTaskId) };
}

const click = (user: string, message: FakeMessage, text: string) => {
  const button = buttonsOf(message).find((b) => b.text === text);
  if (!button) throw new Error(`no button ${text}`);
  return w.post(
    "/slack/interactivity",
    interactivityForm(buttonClick({ team: TEAM, user, channel: "C1", message, button })),
  );
};

const status = async (urn: string) => (await w.h.engine.deps.resources.getAs("uip.Interaction", urn))?.status;

describe("answering a question in Slack", () => {
  it("a click by someone the policy refuses is refused, told only to them, and answers nothing", async () => {
    const { approval, message } = await lazyRequest();
    const before = await w.written();
    const res = await click("U_BOB", message, "Run it");
    expect(res.status).toBe(200);
    expect(await status(approval.meta.id)).toBe("pending");
    expect(await w.written()).toEqual(before);
    const [told] = w.fake.calls("chat.postEphemeral");
    expect(told?.token).toBe(w.settings.slack?.workspaces[TEAM]?.botToken);
    expect(told?.args).toMatchObject({ channel: "C1", user: "U_BOB", thread_ts: "1780000000.000100" });
    expect(String(told?.args.text)).toMatch(/^Refused: user_slack\.T1\.U_BOB may not answer/);
  });

  it("a click by the person who asked (mapped to their Arbor id) answers it and the work goes on", async () => {
    const { rootTaskId, approval, message } = await lazyRequest();
    expect((await click("U_ADA", message, "Run it")).status).toBe(200);
    const answered = await w.h.engine.deps.resources.getAs("uip.Interaction", approval.meta.id);
    expect(answered?.response).toMatchObject({ selectedOptionId: "approve", actor: "user_ada" });
    await until("the request is done", async () => {
      await w.h.idle();
      return (await w.h.engine.result(rootTaskId)).view?.status === "done";
    });
    // A second click on the same button: already answered, told, nothing changes.
    await click("U_ADA", message, "Run it");
    expect(String(w.fake.calls("chat.postEphemeral").at(-1)?.args.text)).toMatch(/already answered/);
  });

  it("an admin may answer a question of someone else's conversation", async () => {
    const { approval, message } = await lazyRequest();
    await click("U_ADM", message, "Cancel");
    const answered = await w.h.engine.deps.resources.getAs("uip.Interaction", approval.meta.id);
    expect(answered?.response).toMatchObject({ selectedOptionId: "reject", actor: "user_slack.T1.U_ADM" });
  });

  it("'Edit the plan…' opens a modal with the plan; invalid JSON is refused on its field; an edited plan runs", async () => {
    const { rootTaskId, approval, message } = await lazyRequest();
    const trigger = "trigger.edit.1";
    const button = buttonsOf(message).find((b) => b.text === "Edit the plan…");
    expect(button).toBeDefined();
    const open = await w.post(
      "/slack/interactivity",
      interactivityForm(
        buttonClick({
          team: TEAM,
          user: "U_ADA",
          channel: "C1",
          message,
          button: button as never,
          triggerId: trigger,
        }),
      ),
    );
    expect(open.status).toBe(200);
    const [opened] = w.fake.calls("views.open");
    expect(opened?.args.trigger_id).toBe(trigger);
    const view = opened?.args.view as {
      private_metadata: string;
      blocks: { block_id?: string; element?: { initial_value?: string } }[];
    };
    expect(JSON.parse(view.private_metadata)).toMatchObject({ urn: approval.meta.id, mode: "edit" });
    const initial = view.blocks.find((b) => b.block_id === "arbor.value")?.element?.initial_value ?? "";
    expect(JSON.parse(initial)).toMatchObject({ name: "Offsite" });

    const submit = (value: string, user = "U_ADA") =>
      w.post(
        "/slack/interactivity",
        interactivityForm({
          type: "view_submission",
          team: { id: TEAM },
          user: { id: user, team_id: TEAM },
          view: {
            callback_id: "arbor.answer",
            private_metadata: view.private_metadata,
            state: { values: { "arbor.value": { value: { type: "plain_text_input", value } } } },
          },
        }),
      );
    const bad = await submit("{not json");
    expect(await bad.json()).toEqual({
      response_action: "errors",
      errors: { "arbor.value": "That is not valid JSON" },
    });
    const refused = await submit(initial, "U_BOB");
    expect(((await refused.json()) as { errors: Record<string, string> }).errors["arbor.value"]).toMatch(
      /^Refused/,
    );
    expect(await status(approval.meta.id)).toBe("pending");
    const edited = JSON.stringify({
      name: "Offsite",
      purpose: "Plan the offsite",
      subtasks: [{ name: "Food", purpose: "Order it" }],
    });
    const ok = await submit(edited);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("");
    const answered = await w.h.engine.deps.resources.getAs("uip.Interaction", approval.meta.id);
    expect(answered?.response).toMatchObject({
      selectedOptionId: "approve",
      inputValue: edited,
      actor: "user_ada",
    });
    await until("the edited plan ran", async () => {
      await w.h.idle();
      return (await w.h.tree(rootTaskId)).has("Food");
    });
  });

  it("an input question's modal refuses a value that fails its validation (regex, required) on its field", async () => {
    const { rootTaskId } = await lazyRequest();
    const urn = await requestInteraction(w.h.engine.deps, rootTaskId, "ask-code", {
      kind: "input",
      purpose: "request_info",
      display: { title: "Which airport?" },
      validation: { regex: "^[A-Z]{3}$", required: true },
    });
    const q = (await w.h.engine.deps.resources.getAs("uip.Interaction", urn)) as InteractionResource;
    const message = posted(questionOf(q), rootTaskId);
    await click("U_ADA", message, "Answer…");
    const view = w.fake.calls("views.open").at(-1)?.args.view as { private_metadata: string };
    const submit = (value: string) =>
      w.post(
        "/slack/interactivity",
        interactivityForm({
          type: "view_submission",
          team: { id: TEAM },
          user: { id: "U_ADA", team_id: TEAM },
          view: {
            callback_id: "arbor.answer",
            private_metadata: view.private_metadata,
            state: { values: { "arbor.value": { value: { type: "plain_text_input", value } } } },
          },
        }),
      );
    expect(await (await submit("")).json()).toEqual({
      response_action: "errors",
      errors: { "arbor.value": "An answer is required" },
    });
    expect(await (await submit("lhr")).json()).toEqual({
      response_action: "errors",
      errors: { "arbor.value": "Must match ^[A-Z]{3}$" },
    });
    expect(await status(urn)).toBe("pending");
    // A person the policy refuses does not even get the form.
    const opened = w.fake.calls("views.open").length;
    await click("U_BOB", message, "Answer…");
    expect(w.fake.calls("views.open")).toHaveLength(opened);
    expect(String(w.fake.calls("chat.postEphemeral").at(-1)?.args.text)).toMatch(/^Refused/);
    expect((await submit("LHR")).status).toBe(200);
    expect((await w.h.engine.deps.resources.getAs("uip.Interaction", urn))?.response).toMatchObject({
      inputValue: "LHR",
      actor: PERSON.id,
    });
  });

  it("a modal Slack will not open (an expired trigger) is told to the person, who clicks again", async () => {
    const { approval, message } = await lazyRequest();
    w.fake.fail("views.open", { error: "expired_trigger_id" });
    expect((await click("U_ADA", message, "Edit the plan…")).status).toBe(200);
    expect(String(w.fake.calls("chat.postEphemeral").at(-1)?.args.text)).toMatch(/could not be opened/);
    await click("U_ADA", message, "Edit the plan…");
    expect(w.fake.calls("views.open")).toHaveLength(2);
    expect(await status(approval.meta.id)).toBe("pending");
  });

  it("a click by someone of another organisation (a shared channel) is refused, even if their user id is mapped", async () => {
    const { approval, message } = await lazyRequest();
    const button = buttonsOf(message).find((b) => b.text === "Run it");
    const payload = buttonClick({
      team: TEAM,
      user: "U_ADA",
      channel: "C1",
      message,
      button: button as never,
    });
    const res = await w.post(
      "/slack/interactivity",
      interactivityForm({ ...payload, user: { id: "U_ADA", team_id: "T_OTHER" } }),
    );
    expect(res.status).toBe(200);
    expect(String(w.fake.calls("chat.postEphemeral").at(-1)?.args.text)).toMatch(
      /members of this workspace only/,
    );
    expect(await status(approval.meta.id)).toBe("pending");
  });
});
