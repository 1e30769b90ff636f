import type { ScriptedTurn, ScriptFunction } from "../../shared/adapters/llm/scripted-llm.ts";
import type { TaskSpec } from "../../shared/domain/resources.ts";
import type { AssistantDefinition } from "../../shared/engine/engine.ts";
import type { LlmRequest } from "../../shared/ports/llm.ts";

/**
 * An offline scenario for the scripted model: a team offsite planned as a tree of depth 3, with
 * tool calls, one corrective round (the agenda misses a team dinner) and one approval (sending
 * the invitations is risky). `arbor run --example offsite` plays it with no model configured.
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
  "Plan a team dinner": { answer: "Thursday 20:00 at a tasca in Alfama; a table for 12 is held." },
};

const CORRECTION: TaskSpec = {
  name: "Plan a team dinner",
  purpose: "Book a restaurant for the whole team on the first evening",
};

/** The scripted model: answers as planner, as evaluator, or as the assistant of a leaf. */
export const script: ScriptFunction = (request) => {
  const tools = request.tools?.map((t) => t.name) ?? [];
  const prompt = firstUser(request);
  if (tools.includes("create_plan"))
    return { toolCalls: [{ name: "create_plan", arguments: PLAN as unknown as Record<string, unknown> }] };
  if (tools.includes("report_evaluation")) return evaluation(prompt);
  const name = /^# Task: (.+)$/m.exec(prompt)?.[1] ?? "";
  const leaf = LEAVES[name] ?? { answer: `Done: ${name}` };
  const toolResults = request.messages.filter((m) => m.role === "tool").length;
  if (leaf.tool && toolResults === 0) return { toolCalls: [leaf.tool] };
  return { content: leaf.answer };
};

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
  const results = [...prompt.matchAll(/^## (.+) \[done\]\n(.+)$/gm)].map((m) => `${m[1]}: ${m[2]}`);
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
