import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { ask, MAX_UNFIT, matchOption, type PlanEditor, type Question } from "../../../../cli/lib/ask.ts";

/** The terminal's side of input and composite questions: a choice or a text, held to the regex. */
async function answer(q: Question, lines: string[], editPlan?: PlanEditor) {
  const out = new PassThrough();
  let printed = "";
  out.on("data", (c: Buffer) => {
    printed += c.toString();
  });
  const answers = (async function* () {
    yield* lines;
  })();
  return { answer: await ask(q, false, answers, out, editPlan), printed };
}

const colour: Question = {
  kind: "composite",
  display: { title: "Which colour?" },
  options: [
    { id: "option-1", label: "Red" },
    { id: "option-2", label: "Blue" },
  ],
  validation: { regex: "^[A-Za-z ]+$" },
};

describe("arbor's terminal questions", () => {
  it("a composite question takes an option by number or a text of one's own, asked again past a bad text", async () => {
    expect((await answer(colour, ["2"])).answer).toEqual({ selectedOptionId: "option-2" });
    const own = await answer(colour, ["Teal 42", "", "Teal"]);
    expect(own.answer).toEqual({ inputValue: "Teal" });
    expect(own.printed).toContain("or write your own answer");
    expect(own.printed).toContain("input must match ^[A-Za-z ]+$");
    expect(own.printed).toContain("An answer is needed.");
  });

  it("an input question holds the text to its regex and to required", async () => {
    const date: Question = {
      kind: "input",
      display: { title: "Which date?" },
      validation: { regex: "^\\d{4}-\\d{2}-\\d{2}$", required: true },
    };
    const r = await answer(date, ["", "soon", "2026-07-03"]);
    expect(r.answer).toEqual({ inputValue: "2026-07-03" });
    expect(r.printed).toContain("An answer is required.");
    expect(r.printed).toContain("input must match");
    // Stdin ends without an answer: none.
    expect((await answer(date, ["soon"])).answer).toBeUndefined();
  });

  it("stops asking after answers in a row that fit nothing, as from a script that pipes `yes`", async () => {
    const endless = (async function* () {
      for (;;) yield "?!";
    })();
    const out = new PassThrough();
    let printed = "";
    out.on("data", (c: Buffer) => {
      printed += c.toString();
    });
    expect(await ask(colour, false, endless, out)).toBeUndefined();
    expect(printed.match(/input must match/g)).toHaveLength(MAX_UNFIT);
    expect(printed).toContain(`${MAX_UNFIT} answers in a row fit none of what was asked`);
    const choice: Question = { ...colour, kind: "select" };
    expect(await ask(choice, false, endless, out)).toBeUndefined();
    expect(printed.match(/"\?!" is not one of the choices/g)).toHaveLength(MAX_UNFIT);
  });

  describe("yes and no", () => {
    // The engine's two yes-or-no questions, as engine/turn/approvals.ts and engine/steps/planner.ts ask them.
    const risky: Question = {
      kind: "confirm",
      purpose: "confirm_risky_action",
      display: { title: "Allow send_email?" },
      options: [
        { id: "approve", label: "Allow", style: "primary" },
        { id: "deny", label: "Deny", style: "danger" },
      ],
    };
    const plan: Question = {
      kind: "confirm",
      purpose: "approve_plan",
      display: { title: "Approve the plan?", content: { name: "Plan", subtasks: [{ name: "A" }] } },
      options: [
        { id: "approve", label: "Run it", style: "primary", isDefault: true },
        { id: "reject", label: "Cancel", style: "danger" },
      ],
    };
    const options = (q: Question) => q.options ?? [];

    it("y, yes, n and no in any case name the allow / deny and run / cancel options", () => {
      for (const [q, no] of [
        [risky, "deny"],
        [plan, "reject"],
      ] as const) {
        for (const typed of ["y", "Y", "yes", "YES", "Yes", " y "])
          expect(matchOption(options(q), typed)?.id, typed).toBe("approve");
        for (const typed of ["n", "N", "no", "NO", "No"])
          expect(matchOption(options(q), typed)?.id, typed).toBe(no);
        for (const typed of ["ye", "yess", "nope", "o", ""])
          expect(matchOption(options(q), typed), typed).toBeUndefined();
      }
    });

    it("a number, an id, or a label or id in any case still name an option", () => {
      expect(matchOption(options(risky), "1")?.id).toBe("approve");
      expect(matchOption(options(risky), "2")?.id).toBe("deny");
      expect(matchOption(options(risky), "3")).toBeUndefined();
      expect(matchOption(options(risky), "0")).toBeUndefined();
      expect(matchOption(options(risky), "deny")?.id).toBe("deny");
      expect(matchOption(options(risky), "ALLOW")?.id).toBe("approve");
      expect(matchOption(options(plan), "run it")?.id).toBe("approve");
      expect(matchOption(options(plan), "Cancel")?.id).toBe("reject");
    });

    it("gives y and n no meaning where the options are not a yes and a no", () => {
      // An assignment, a strategy, or the options an assistant wrote: y names none of them.
      expect(matchOption(options(colour), "y")).toBeUndefined();
      expect(matchOption(options(colour), "no")).toBeUndefined();
      const assign = [
        { id: "cld:common.Tenant.t/common.Assistant.a", label: "analyst" },
        { id: "cld:common.Tenant.t/common.Assistant.b", label: "writer" },
      ];
      expect(matchOption(assign, "yes")).toBeUndefined();
      // A yes without a no (or two yeses) is no yes-or-no question either.
      expect(matchOption([{ id: "approve", label: "Allow" }], "y")).toBeUndefined();
      expect(
        matchOption(
          [
            { id: "yes", label: "Yes" },
            { id: "no", label: "No" },
          ],
          "YES",
        )?.id,
      ).toBe("yes");
    });

    it("at the prompt: says what y and n mean, and takes them", async () => {
      const allowed = await answer(risky, ["Y"]);
      expect(allowed.answer).toEqual({ selectedOptionId: "approve" });
      expect(allowed.printed).toContain("Choose 1-2 or an id, y (Allow) or n (Deny): ");
      expect((await answer(risky, ["no"])).answer).toEqual({ selectedOptionId: "deny" });
      expect((await answer(plan, ["maybe", "N"])).answer).toEqual({ selectedOptionId: "reject" });
      // A free question whose options are a yes and a no takes y as the option, not as a text.
      expect((await answer({ ...risky, kind: "composite" }, ["y"])).answer).toEqual({
        selectedOptionId: "approve",
      });
    });
  });

  describe("editing a plan to approve", () => {
    const plan: Question = {
      kind: "confirm",
      purpose: "approve_plan",
      display: { title: "Approve the plan?", content: { name: "Plan", subtasks: [{ name: "A" }] } },
      options: [
        { id: "approve", label: "Run it", isDefault: true },
        { id: "reject", label: "Cancel" },
      ],
    };

    it("e opens the editor on the plan; an edit sent goes with the plan's approval", async () => {
      const seen: unknown[] = [];
      const editor: PlanEditor = async (content) => {
        seen.push(content);
        return '{"name":"Plan","subtasks":[{"name":"B"}]}';
      };
      const r = await answer(plan, ["E"], editor);
      expect(seen).toEqual([plan.display.content]);
      expect(r.answer).toEqual({
        selectedOptionId: "approve",
        inputValue: '{"name":"Plan","subtasks":[{"name":"B"}]}',
      });
      expect(r.printed).toContain("y (Run it) or n (Cancel), e to edit the plan: ");
    });

    it("an edit not sent asks again, and is not counted as an answer that fits nothing", async () => {
      let edits = 0;
      const nothing: PlanEditor = async () => {
        edits++;
        return undefined;
      };
      const many = [...Array.from({ length: MAX_UNFIT + 2 }, () => "edit"), "y"];
      expect((await answer(plan, many, nothing)).answer).toEqual({ selectedOptionId: "approve" });
      expect(edits).toBe(MAX_UNFIT + 2);
    });

    it("offers no edit where nothing can edit, nor on any other question", async () => {
      const r = await answer(plan, ["e", "y"]);
      expect(r.printed).not.toContain("e to edit");
      expect(r.printed).toContain('"e" is not one of the choices.');
      expect(r.answer).toEqual({ selectedOptionId: "approve" });
      const never: PlanEditor = async () => {
        throw new Error("not a plan");
      };
      const risky = { ...plan, purpose: "confirm_risky_action" as const };
      expect((await answer(risky, ["e", "n"], never)).answer).toEqual({ selectedOptionId: "reject" });
    });
  });
});
