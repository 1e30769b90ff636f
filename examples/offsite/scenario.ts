import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { TaskSpec } from "../../shared/domain/resources.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";

/**
 * An offline scenario for the scripted model: a team offsite planned as a tree of depth 3, with
 * tool calls, one corrective round (the agenda misses a team dinner) and one approval (sending
 * the invitations is risky). `arbor run --example offsite` plays it with no model configured;
 * `arbor serve --example offsite` answers whatever it is sent with the same model, so it answers
 * what else it can: a request about the offsite gets the offsite, a simple sum ("What is 1200 EUR
 * shared by 12 people?") a one-task plan worked out with the calculator, anything else a plain
 * answer that says what the example is and how to give Arbor a real model. It reports only what
 * its tools did: a call a person denied (or that failed) is said not to have happened.
 */
export const REQUEST =
  "Plan a two-day team offsite in Lisbon for 12 people, with a 3,000 EUR budget for venues.";

export const ASSISTANTS: AssistantDefinition[] = [
  {
    name: "Event planner",
    id: "event-planner",
    purpose: "Find venues, book travel and hotels, arrange logistics for trips and events",
    applicability: "Venues, flights, transfers, accommodation, budgets per person for events",
    tools: ["calculator"],
  },
  {
    name: "Facilitator",
    id: "facilitator",
    purpose: "Design agendas, workshops and working sessions for teams",
    applicability: "Agendas, session plans, retrospectives, team activities and dinners",
    tools: ["word_count"],
  },
  {
    name: "Communications",
    id: "communications",
    purpose: "Write and send emails, invitations and announcements to people",
    applicability: "Inviting a team, announcing plans, sending messages",
    tools: ["send_email"],
  },
  {
    name: "Generalist",
    id: "generalist",
    purpose: "Handle any task no specialist fits, and combine results",
    tools: ["calculator", "word_count"],
  },
];

export const PLAN: TaskSpec = {
  name: "Plan the offsite",
  purpose: "Two days in Lisbon for 12 people within budget",
  evaluation: "Venue, travel, agenda and invitations are settled",
  subtasks: [
    {
      name: "Logistics",
      purpose: "Settle where the team stays and how it travels",
      evaluation: "A venue within budget and a travel plan",
      subtasks: [
        {
          name: "Shortlist venues",
          purpose: "Find venues for 12 people within the venue budget",
          applicability: "venues and budgets per person",
        },
        {
          name: "Book travel",
          purpose: "Plan flights and transfers for 12 people",
          applicability: "flights and transfers",
        },
      ],
    },
    {
      name: "Agenda",
      purpose: "Decide what the two days are for",
      evaluation: "Working sessions for both days and a team dinner on the first evening",
      subtasks: [
        { name: "Draft sessions", purpose: "Propose the working sessions and workshops for both days" },
        { name: "Invite the team", purpose: "Send the invitation email with dates and agenda to the team" },
      ],
    },
  ],
};

const LEAVES: Record<
  string,
  { tool?: { name: string; arguments: Record<string, unknown> }; answer: string }
> = {
  "Shortlist venues": {
    tool: { name: "calculator", arguments: { a: 3000, b: 12, op: "divide" } },
    answer:
      "LX Factory loft, Palácio Chiado and Village Underground all hold 12 people for about 250 EUR each.",
  },
  "Book travel": {
    tool: { name: "calculator", arguments: { a: 240, b: 12, op: "multiply" } },
    answer: "Flights on Thursday morning and a minibus transfer: about 2,880 EUR for 12 people.",
  },
  "Draft sessions": {
    tool: {
      name: "word_count",
      arguments: { text: "Roadmap review, retrospective, two design workshops, demo hour" },
    },
    answer: "Day 1: roadmap review and retrospective. Day 2: two design workshops and a demo hour.",
  },
  "Invite the team": {
    tool: {
      name: "send_email",
      arguments: {
        to: "team@example.com",
        subject: "Lisbon offsite, 14-15 May",
        body: "Two days in Lisbon: sessions, workshops and a dinner.",
      },
    },
    answer: "The invitation went out to team@example.com.",
  },
  "Plan a team dinner": {
    answer: "Thursday 20:00 at a tasca in Alfama, a table for 12 (to be booked: no booking tool was used).",
  },
};

/** What a leaf says instead of its answer when its tool call did not happen (denied, or failed). */
const NOT_DONE: Record<string, (why: string) => string> = {
  "Invite the team": (why) => `The invitation was not sent: ${why}. Nothing went to team@example.com.`,
};

const CORRECTION: TaskSpec = {
  name: "Plan a team dinner",
  purpose: "Book a restaurant for the whole team on the first evening",
};

/** A request the example plays the offsite for. */
const ABOUT_THE_OFFSITE = /\boff-?sites?\b/i;

/** The one-task plans for what is not the offsite (the leaf finds the request in its prompt). */
const SUM_TASK = "Work out the figure";
const ANSWER_TASK = "Answer the request";

/** The scripted model: answers as planner, as evaluator, or as the assistant of a leaf. */
export const script: ScriptFunction = (request) => {
  const tools = request.tools?.map((t) => t.name) ?? [];
  const prompt = firstUser(request);
  if (tools.includes("create_plan"))
    return { toolCalls: [{ name: "create_plan", arguments: planFor(prompt) }] };
  if (tools.includes("report_evaluation")) return evaluation(prompt);
  const name = /^# Task: (.+)$/m.exec(prompt)?.[1] ?? "";
  if (name === SUM_TASK) return sumTurn(request, prompt);
  if (name === ANSWER_TASK) return { content: plainAnswer(requestIn(prompt)) };
  const leaf = LEAVES[name] ?? { answer: `Done: ${name}` };
  const result = request.messages.findLast((m) => m.role === "tool");
  if (leaf.tool && !result) return { toolCalls: [leaf.tool] };
  if (result?.isError) return { content: notDone(name, leaf.tool?.name ?? "the tool", result.content) };
  return { content: leaf.answer };
};

/** The plan for a request: the offsite, a sum, or one task that answers it plainly. */
function planFor(text: string): Record<string, unknown> {
  if (ABOUT_THE_OFFSITE.test(text)) return PLAN as unknown as Record<string, unknown>;
  const sum = sumIn(text);
  const spec: TaskSpec = sum
    ? {
        name: SUM_TASK,
        purpose: `Work out ${sum.a} ${OP_WORDS[sum.op]} ${sum.b}${sum.unit ? ` (${sum.unit})` : ""}`,
        applicability: "Arithmetic: budgets, amounts per person, totals",
        evaluation: "The figure is right and says what it is",
      }
    : {
        name: ANSWER_TASK,
        purpose: "Handle a request no specialist fits, and answer it",
        evaluation: "The answer says plainly what can and cannot be done",
      };
  return spec as unknown as Record<string, unknown>;
}

/** A leaf whose tool call did not happen says so, never what the call would have done. */
function notDone(task: string, tool: string, result: string): string {
  const why = /declined/i.test(result) ? "a person chose Deny" : `${tool} failed (${result.slice(0, 300)})`;
  return NOT_DONE[task]?.(why) ?? `${task} was not done: ${why}.`;
}

/** The request as a leaf's prompt gives it (engine/turn/direct.ts: "- The request: ..."). */
function requestIn(prompt: string): string {
  return /(?:^|\n)- The request: ([\s\S]*?)(?=\n- Part of: |\n# |$)/.exec(prompt)?.[1]?.trim() ?? "";
}

function plainAnswer(request: string): string {
  const asked = request.length > 200 ? `${request.slice(0, 200)}…` : request;
  return (
    "This is Arbor's offline example (--example offsite): its scripted model plays one scenario, planning a " +
    'team offsite ("Plan a two-day team offsite in Lisbon for 12 people"), and works out simple sums such as ' +
    `"What is 1200 EUR shared by 12 people?". It has no answer to "${asked}". For real answers, start Arbor ` +
    "with a model instead of --example: ARBOR_MODEL_PROVIDER=openai ARBOR_OPENAI_BASE_URL=http://localhost:11434/v1 " +
    "ARBOR_MODEL=llama3.1 (any OpenAI-compatible server), or ARBOR_MODEL_PROVIDER=bedrock AWS_REGION=us-east-1 " +
    "ARBOR_MODEL=<a Bedrock model id>."
  );
}

// ---- sums ----------------------------------------------------------------------------------------

type Op = "add" | "subtract" | "multiply" | "divide";
interface Sum {
  a: number;
  b: number;
  op: Op;
  /** The unit of `a` (EUR, USD...), if the request gives one. */
  unit?: string;
}
const OP_WORDS: Record<Op, string> = {
  add: "plus",
  subtract: "minus",
  multiply: "times",
  divide: "divided by",
};
const NUMBER = String.raw`(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)`;
const UNIT = String.raw`(EUR|USD|GBP|CHF|€|\$|£|euros?|dollars?|pounds?)`;
const OPS: [RegExp, Op][] = [
  [
    new RegExp(
      String.raw`${NUMBER}\s*${UNIT}?\s*(?:shared|split|divided)\s+(?:by|between|among(?:st)?|into)\s+${NUMBER}`,
      "i",
    ),
    "divide",
  ],
  [new RegExp(String.raw`${NUMBER}\s*${UNIT}?\s*(?:/|÷|over)\s*${NUMBER}`, "i"), "divide"],
  [
    new RegExp(String.raw`${NUMBER}\s*${UNIT}?\s*(?:\*|×|x|times|multiplied by)\s*${NUMBER}`, "i"),
    "multiply",
  ],
  [new RegExp(String.raw`${NUMBER}\s*${UNIT}?\s*(?:\+|plus|added to)\s*${NUMBER}`, "i"), "add"],
  [new RegExp(String.raw`${NUMBER}\s*${UNIT}?\s*(?:\s-\s|−|minus|less)\s*${NUMBER}`, "i"), "subtract"],
];

const UNIT_BEFORE = new RegExp(String.raw`${UNIT}\s*$`, "i");

/** The first sum the text asks for, if any. */
function sumIn(text: string): Sum | undefined {
  for (const [pattern, op] of OPS) {
    const m = pattern.exec(text);
    if (!m) continue;
    const [a, b] = [numberOf(m[1]), numberOf(m[3])];
    // The unit after the first number ("1200 EUR"), else right before it ("EUR 1200", "€1200").
    const unit = m[2] ?? UNIT_BEFORE.exec(text.slice(0, m.index))?.[1];
    if (Number.isFinite(a) && Number.isFinite(b))
      return { a, b, op, ...(unit ? { unit: unitName(unit) } : {}) };
  }
  return undefined;
}

const numberOf = (s: string | undefined) => Number((s ?? "").replaceAll(",", ""));
const unitName = (u: string) =>
  ({ "€": "EUR", $: "USD", "£": "GBP" })[u] ??
  (/^euro/i.test(u) ? "EUR" : /^dollar/i.test(u) ? "USD" : /^pound/i.test(u) ? "GBP" : u.toUpperCase());

/** The leaf of a sum: the calculator when its assistant has it, then the figure it gave. */
function sumTurn(request: Parameters<ScriptFunction>[0], prompt: string): ScriptedTurn {
  const sum = sumIn(requestIn(prompt));
  if (!sum) return { content: plainAnswer(requestIn(prompt)) };
  const result = request.messages.findLast((m) => m.role === "tool");
  const offered = request.tools?.some((t) => t.name === "calculator") ?? false;
  if (!result && offered)
    return { toolCalls: [{ name: "calculator", arguments: { a: sum.a, b: sum.b, op: sum.op } }] };
  if (result?.isError)
    return { content: `The calculator could not work it out: ${result.content.slice(0, 300)}` };
  const figure = result ? Number(result.content) : compute(sum);
  return { content: describeSum(sum, figure) };
}

function compute({ a, b, op }: Sum): number {
  return op === "add" ? a + b : op === "subtract" ? a - b : op === "multiply" ? a * b : a / b;
}

function describeSum(sum: Sum, figure: number): string {
  const u = (n: number) => `${format(n)}${sum.unit ? ` ${sum.unit}` : ""}`;
  if (!Number.isFinite(figure)) return `${format(sum.a)} ${OP_WORDS[sum.op]} ${format(sum.b)} has no answer.`;
  if (sum.op === "divide") return `${u(sum.a)} shared by ${format(sum.b)} is ${u(figure)} each.`;
  return `${u(sum.a)} ${OP_WORDS[sum.op]} ${format(sum.b)} is ${u(figure)}.`;
}

const format = (n: number) => String(Math.round(n * 100) / 100);

function evaluation(prompt: string): ScriptedTurn {
  const task = /^# Task: (.+)$/m.exec(prompt)?.[1];
  const round = Number(/\(round (\d+)\)/.exec(prompt)?.[1] ?? 0);
  if (task === "Agenda" && round === 0) {
    return {
      toolCalls: [
        {
          name: "report_evaluation",
          arguments: {
            passed: false,
            reason: "There is no team dinner on the first evening.",
            corrective_subtasks: [CORRECTION],
          },
        },
      ],
    };
  }
  // Every result whole (a child's answer may have several lines): what a subtask said it did not
  // do stays in the answer.
  const results = prompt.split(/\n\n(?=## )/).flatMap((section) => {
    const m = /^## (.+) \[done\]\n([\s\S]*)$/.exec(section);
    if (!m) return [];
    const lines = (m[2] as string).trim().split("\n");
    return lines.length === 1 ? [`${m[1]}: ${lines[0]}`] : [`${m[1]}:`, ...lines.map((l) => `  ${l}`)];
  });
  return {
    toolCalls: [
      {
        name: "report_evaluation",
        arguments: { passed: true, reason: "The criteria are met.", answer: results.join("\n") },
      },
    ],
  };
}

const firstUser = (r: LlmRequest) => {
  const m = r.messages.find((x) => x.role === "user");
  return m && "content" in m ? (m.content ?? "") : "";
};
