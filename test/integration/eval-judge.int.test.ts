import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { describe, expect, it } from "vitest";
import { BedrockLlm, bedrockClientConfig } from "../../shared/adapters/llm/bedrock-llm.ts";
import { OpenAiCompatibleLlm } from "../../shared/adapters/llm/openai-compatible-llm.ts";
import { JUDGE_SYSTEM, judgeScore } from "../../shared/evals/judge.ts";
import type { Llm } from "../../shared/ports/llm.ts";
import { FakeBedrock } from "../peers/fake-bedrock.ts";
import { FakeOpenAi } from "../peers/fake-openai.ts";

/**
 * The judge scorer (shared/evals/judge.ts) with the real model clients: the AWS SDK's Bedrock
 * client against the fake Bedrock server, and the OpenAI-compatible adapter against the fake chat
 * server. The judge is asked through one forced tool call; what it is shown and which model
 * answered stay with the score; a judge that gives no score gives 0, saying so.
 */
const INPUT = {
  request: "Plan a two-day team offsite in Lisbon for 12 people",
  answer: "Venue: LX Factory loft, 250 EUR each. The invitation went out to team@example.com.",
  criteria: "Names a venue within 3,000 EUR for 12 people, and says the team was invited",
};
const JUDGED = {
  toolCalls: [
    {
      name: "report_score",
      arguments: { score: 0.8, reason: "A venue and the invitation; the total is not given" },
    },
  ],
};
const SILENT = { content: "It looks fine to me." };

type Backend = { llm: Llm; prompts: () => string[]; stop: () => Promise<void> };

async function bedrock(script: readonly object[]): Promise<Backend> {
  const fake = new FakeBedrock(script as never);
  const { endpoint } = await fake.start({ protocol: "http1" });
  const client = new BedrockRuntimeClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    ...bedrockClientConfig,
    requestHandler: new NodeHttpHandler({ requestTimeout: 10_000 }),
  });
  return {
    llm: new BedrockLlm({
      client,
      model: "us.anthropic.claude-haiku-4-5-20251001-v1:0",
      sleep: async () => {},
    }),
    prompts: () => fake.calls.map((c) => JSON.stringify(c.body)),
    stop: async () => {
      client.destroy();
      await fake.stop();
    },
  };
}

async function openai(script: readonly object[]): Promise<Backend> {
  const fake = new FakeOpenAi(script as never);
  const { baseUrl } = await fake.start();
  return {
    llm: new OpenAiCompatibleLlm({ baseUrl, model: "llama3.1:8b", sleep: async () => {} }),
    prompts: () => fake.calls.map((c) => JSON.stringify(c.body)),
    stop: () => fake.stop(),
  };
}

describe.each([
  ["Bedrock (the AWS SDK against the fake Bedrock)", bedrock],
  ["an OpenAI-compatible server (the fake chat server)", openai],
])("the judge on %s", (_, backend) => {
  it("scores an answer through its report_score call, keeping the model and the prompt", async () => {
    const b = await backend([JUDGED]);
    try {
      const score = await judgeScore(b.llm, INPUT);
      expect(score).toMatchObject({
        scorer: "judge",
        score: 0.8,
        reason: "A venue and the invitation; the total is not given",
      });
      expect(score.judge?.model).toMatch(/claude-haiku-4-5|llama3\.1/);
      expect(score.judge?.prompt).toContain(INPUT.criteria);
      const sent = b.prompts()[0] as string;
      expect(sent).toContain("report_score");
      expect(sent).toContain(JUDGE_SYSTEM.slice(0, 40));
      expect(sent).toContain("LX Factory loft");
    } finally {
      await b.stop();
    }
  });

  it("gives 0, saying so, when the judge answers without a score or with one out of range", async () => {
    const b = await backend([
      SILENT,
      { toolCalls: [{ name: "report_score", arguments: { score: 7, reason: "great" } }] },
    ]);
    try {
      expect(await judgeScore(b.llm, INPUT)).toMatchObject({
        score: 0,
        reason: expect.stringMatching(/gave no score.*looks fine/),
      });
      expect(await judgeScore(b.llm, INPUT)).toMatchObject({
        score: 0,
        reason: expect.stringMatching(/not a number from 0 to 1 \(7\)/),
      });
    } finally {
      await b.stop();
    }
  });
});
