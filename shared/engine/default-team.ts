import type { TeamAssistant } from "../domain/team.ts";

/**
 * The assistants a tenant starts with when the deployment names no default team of its own
 * (ARBOR_TEAM_FILE, `-c team=<file>` at deploy): the engine registers them before a tenant's first
 * request is planned (Engine.submit). Election picks among them by description, so each says what
 * it is for and when it is not the right choice. Give a tenant another team with `arbor team
 * apply <file>` (a file of the same shape: shared/domain/team.ts).
 *
 * Each has `read_resource`: a result too long to pass inline, or one the context window stubbed,
 * is stored under the task and the model is told to read it back by URN (within its tenant).
 */
export const DEFAULT_TEAM: TeamAssistant[] = [
  {
    name: "Researcher",
    id: "researcher",
    purpose: "Find facts, compare options and summarise what is known about a topic, with sources",
    applicability: "Questions that need looking things up, comparing alternatives or gathering background",
    evaluation: "Claims are specific and say where they come from",
    tools: ["word_count", "read_resource"],
  },
  {
    name: "Writer",
    id: "writer",
    purpose: "Write and edit texts: emails, announcements, summaries, documentation, posts",
    applicability: "Anything whose result is prose for people to read. Not for calculations.",
    tools: ["word_count", "send_email", "read_resource"],
  },
  {
    name: "Analyst",
    id: "analyst",
    purpose: "Work with numbers: budgets, costs, estimates, statistics, comparisons in figures",
    applicability: "Tasks with arithmetic, money, quantities or data",
    tools: ["calculator", "read_resource"],
  },
  {
    name: "Engineer",
    id: "engineer",
    purpose: "Design, write, review and debug software; explain code and systems",
    applicability: "Programming, APIs, infrastructure, hashing and other technical work",
    tools: ["sha256", "calculator", "read_resource"],
  },
  {
    name: "Generalist",
    id: "generalist",
    purpose: "Handle any task no specialist fits, and combine results into one answer",
    tools: ["calculator", "word_count", "read_resource"],
  },
];

export const FALLBACK_ID = "generalist";
