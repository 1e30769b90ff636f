/**
 * Routing-quality evaluation of the local embedder.
 *
 *   node scripts/routing-eval.ts                # the dev set (the one the embedder is tuned on)
 *   node scripts/routing-eval.ts --set holdout  # the held-out set (never tuned on)
 *   node scripts/routing-eval.ts --set all      # both
 *
 * Prints accuracy, accuracy on the paraphrased tasks, every confusion, and the mean margin between
 * the winning assistant and the runner-up.
 */
import { parseArgs } from "node:util";
import { LocalEmbedder } from "../shared/adapters/embeddings/local-embedder.ts";
import {
  evaluateRouting,
  loadRoutingSet,
  type RoutingReport,
  type SetName,
} from "../test/fixtures/routing/evaluate-routing.ts";

/** The report goes to stdout, as the CLI writes its own (structured logs stay for services). */
const say = (line: string) => process.stdout.write(`${line}\n`);

const { values } = parseArgs({
  options: { set: { type: "string", default: "dev" }, verbose: { type: "boolean", default: false } },
});
const sets: SetName[] =
  values.set === "all" ? ["dev", "holdout"] : values.set === "holdout" ? ["holdout"] : ["dev"];
if (!["dev", "holdout", "all"].includes(values.set)) {
  console.error(`--set must be dev, holdout or all (got ${values.set})`);
  process.exit(2);
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function print(r: RoutingReport): void {
  const para = r.outcomes.filter((o) => o.task.paraphrased);
  say(`\n== ${r.set} set, embedder ${r.embedderId}`);
  say(`accuracy              ${pct(r.accuracy)}  (${r.correct}/${r.total})`);
  say(
    `paraphrased accuracy  ${pct(r.paraphrasedAccuracy)}  (${para.filter((o) => o.correct).length}/${para.length})`,
  );
  say(`mean margin           ${r.meanMargin.toFixed(4)}  (winner - runner-up cosine)`);
  const wrong = r.outcomes.filter((o) => !o.correct);
  say(wrong.length ? "confusions:" : "confusions: none");
  for (const o of wrong) {
    say(
      `  ${o.task.paraphrased ? "[P] " : "    "}${o.task.name}: expected ${o.task.expected} (${o.expectedScore.toFixed(3)}), got ${o.winner} (${o.winnerScore.toFixed(3)})`,
    );
  }
  if (values.verbose) {
    for (const o of r.outcomes.filter((x) => x.correct)) {
      say(
        `  ok ${o.task.name}: ${o.winner} ${o.winnerScore.toFixed(3)} vs ${o.runnerUp} ${o.runnerUpScore.toFixed(3)}`,
      );
    }
  }
}

const embedder = new LocalEmbedder();
for (const name of sets) print(await evaluateRouting(embedder, loadRoutingSet(name)));
