import { describe, expect, it } from "vitest";
import { LocalEmbedder } from "../../../../shared/adapters/embeddings/local-embedder.ts";
import { evaluateRouting, keywordsUsed, loadRoutingSet } from "../../../fixtures/routing/evaluate-routing.ts";

/**
 * Quality gate for assistant election with the local embedder (not a timing test). The dev set is
 * the one the embedder is tuned on; the held-out set is only measured (scripts/routing-eval.ts).
 */
describe("routing quality of the local embedder", () => {
  const embedder = new LocalEmbedder();

  it("elects the labelled assistant for at least 80% of the dev-set tasks", async () => {
    const report = await evaluateRouting(embedder, loadRoutingSet("dev"));
    const confusions = report.outcomes
      .filter((o) => !o.correct)
      .map((o) => `${o.task.name}: expected ${o.task.expected}, got ${o.winner}`);
    expect(report.total).toBeGreaterThanOrEqual(48);
    expect(report.accuracy, confusions.join("\n")).toBeGreaterThanOrEqual(0.8);
  });

  it.each(["dev", "holdout"] as const)("the %s set is fit for purpose and honestly labelled", (name) => {
    const set = loadRoutingSet(name);
    const paraphrased = set.tasks.filter((t) => t.paraphrased);
    expect(set.assistants.length).toBeGreaterThanOrEqual(12);
    expect(set.tasks.length).toBeGreaterThanOrEqual(name === "dev" ? 48 : 20);
    expect(paraphrased.length * 3).toBeGreaterThanOrEqual(set.tasks.length);
    // A task marked paraphrased uses none of its assistant's own key words.
    const leaks = paraphrased.flatMap((t) => {
      const assistant = set.assistants.find((a) => a.id === t.expected);
      const used = assistant ? keywordsUsed(t, assistant) : ["<unknown assistant>"];
      return used.length ? [`${t.name}: ${used.join(", ")}`] : [];
    });
    expect(leaks).toEqual([]);
  });
});
