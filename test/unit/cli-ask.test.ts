import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { ask, MAX_UNFIT, type Question } from "../../shared/cli/ask.ts";

/** The terminal's side of input and composite questions: a choice or a text, held to the regex. */
async function answer(q: Question, lines: string[]) {
  const out = new PassThrough();
  let printed = "";
  out.on("data", (c: Buffer) => {
    printed += c.toString();
  });
  const answers = (async function* () {
    yield* lines;
  })();
  return { answer: await ask(q, false, answers, out), printed };
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
});
