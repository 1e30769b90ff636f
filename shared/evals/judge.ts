import type { Llm, LlmToolSpec } from "../ports/llm.ts";
import type { Score } from "./scorers.ts";

/**
 * The judge: a model scores an answer against a case's criteria (written as a task's evaluation
 * criteria are), in [0, 1], with its reason, through one tool call. What it was asked and which
 * model answered are kept with the score, so a judgement can be read again and questioned.
 *
 *   const score = await judgeScore(llm, { request, answer, criteria: "Names a venue within budget" });
 *
 * A judge that answers without the tool, or with a score outside [0, 1], gives 0, saying so: an
 * unjudged answer never passes for a judged one.
 */
export const JUDGE_TOOL: LlmToolSpec = {
  name: "report_score",
  description:
    "Report how well the answer meets the criteria: a score from 0 (not at all) to 1 (fully), and why.",
  parameters: {
    type: "object",
    properties: {
      score: { type: "number", minimum: 0, maximum: 1, description: "0 to 1" },
      reason: { type: "string", description: "Why, in one or two sentences, naming what is met or missing" },
    },
    required: ["score", "reason"],
    additionalProperties: false,
  },
};

export const JUDGE_SYSTEM =
  "You judge an assistant's answer to a request against the criteria given. Judge only what the answer says, " +
  "not what it might have meant. Call report_score once, with a score from 0 to 1 and the reason.";

/** What the judge is shown: the request, the criteria, the answer (each as it is). */
export function judgePrompt(input: { request: string; answer: string; criteria: string }): string {
  return `# Request\n${input.request}\n\n# Criteria\n${input.criteria}\n\n# Answer\n${input.answer}`;
}

export async function judgeScore(
  llm: Llm,
  input: { request: string; answer: string; criteria: string },
): Promise<Score> {
  const prompt = judgePrompt(input);
  const judge = { model: llm.id, prompt };
  const response = await llm.complete({
    system: JUDGE_SYSTEM,
    messages: [{ role: "user", content: prompt }],
    tools: [JUDGE_TOOL],
    toolChoice: { name: JUDGE_TOOL.name },
    temperature: 0,
    maxTokens: 500,
  });
  const call = response.toolCalls.find((c) => c.name === JUDGE_TOOL.name);
  const { score, reason } = (call?.arguments ?? {}) as { score?: unknown; reason?: unknown };
  if (typeof score !== "number" || !Number.isFinite(score) || score < 0 || score > 1)
    return {
      scorer: "judge",
      score: 0,
      reason: call
        ? `the judge's score is not a number from 0 to 1 (${JSON.stringify(score)})`
        : `the judge gave no score (it answered: ${JSON.stringify((response.content ?? "").slice(0, 200))})`,
      judge: { ...judge, model: response.model || llm.id },
    };
  return {
    scorer: "judge",
    score,
    reason: typeof reason === "string" && reason.trim() ? reason.slice(0, 1000) : "(no reason given)",
    judge: { ...judge, model: response.model || llm.id },
  };
}
