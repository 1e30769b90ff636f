/**
 * Contention on usage counters, on DynamoDB Local: N sibling leaves under one root each record K
 * model calls' usage at the same time (shared/engine/usage.ts recordUsage: the leaf's own counter
 * and its ancestors', in one transaction), and every token must be counted once.
 *
 * DynamoDB cancels a transaction that touches an item another transaction is writing at that
 * moment (TransactionConflict; the adapter waits and tries again). DynamoDB Local serialises
 * transactions instead and never does, so the client here does what DynamoDB does: a transaction
 * sent while another one in flight holds one of its items is cancelled with TransactionConflict.
 *
 *   node bench/usage-contention.ts            # N = 10 and 50, K = 5
 *
 * Needs Java 17 (DynamoDB Local, as the integration tests). Not a test: numbers vary with the machine.
 */
import { randomBytes } from "node:crypto";
import {
  DynamoDBClient,
  TransactionCanceledException,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import { DynamoStateStore } from "../shared/adapters/aws/dynamo-state-store.ts";
import { ancestors, lastElement } from "../shared/domain/urn.ts";
import type { EngineDeps } from "../shared/engine/context.ts";
import { recordUsage, USAGE_SHARDS, usageOf } from "../shared/engine/usage.ts";
import type { LlmUsage } from "../shared/ports/llm.ts";
import { startDynamoLocal } from "../test/peers/global-setup.ts";

const K = 5;
/** Up to this long (ms, uniformly drawn) between two model calls of one leaf. */
const THINK_MS = 1000;
const root = "cld:common.Tenant.acme/common.Conversation.c/common.Message.m/plan.Task.root";

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

async function main() {
  const { endpoint, child } = await startDynamoLocal();
  try {
    const raw = new DynamoDBClient({
      endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
    });
    let conflicts = 0;
    const inFlight = new Set<string>();
    let latencies: number[] = [];
    let transactions = 0;
    // Counts what DynamoDB answers, under the adapter's retries.
    const counted = new Proxy(raw, {
      get(target, prop, receiver) {
        if (prop !== "send") {
          const v = Reflect.get(target, prop, receiver);
          return typeof v === "function" ? v.bind(target) : v;
        }
        return async (command: unknown, ...rest: unknown[]) => {
          const send = () => (target.send as (...a: unknown[]) => Promise<unknown>)(command, ...rest);
          if (!(command instanceof TransactWriteItemsCommand)) return send();
          transactions++;
          const keys = (command.input.TransactItems ?? []).map((t) => {
            const key = t.Update?.Key ?? t.Put?.Item ?? t.Delete?.Key ?? t.ConditionCheck?.Key ?? {};
            return `${key.pk?.S}/${key.sk?.S}`;
          });
          if (keys.some((k) => inFlight.has(k))) {
            conflicts++;
            throw new TransactionCanceledException({
              message: "Transaction cancelled, please refer cancellation reasons for specific reasons",
              $metadata: {},
              CancellationReasons: keys.map((k) => ({
                Code: inFlight.has(k) ? "TransactionConflict" : "None",
              })),
            });
          }
          for (const k of keys) inFlight.add(k);
          const sent = performance.now();
          try {
            return await send();
          } finally {
            latencies.push(performance.now() - sent);
            for (const k of keys) inFlight.delete(k);
          }
        };
      },
    });
    const lines: string[] = [];
    // The layout before shards: every ancestor's usage in one item (kept here to compare).
    const oneItem = (deps: EngineDeps, taskId: string, llm: LlmUsage) =>
      deps.state.transact(
        [taskId, ...ancestors(taskId).filter((u) => lastElement(u).type === "Task")].map((id, i) => ({
          op: "add" as const,
          key: `usage#${id}`,
          kind: "usage",
          updatedAt: deps.clock().toISOString(),
          amounts: { inputTokens: llm.inputTokens, outputTokens: llm.outputTokens, turns: i === 0 ? 1 : 0 },
        })),
      );
    const layouts = {
      "one item per ancestor (before)": oneItem,
      [`${USAGE_SHARDS} shards per ancestor (now)`]: (deps: EngineDeps, taskId: string, llm: LlmUsage) =>
        recordUsage(deps, taskId, { usage: llm, model: "scripted" }, true),
    };
    for (const n of [10, 50]) {
      for (const [layout, write] of Object.entries(layouts)) {
        const tableName = `bench-usage-${randomBytes(4).toString("hex")}`;
        await DynamoStateStore.ensureTable(raw, tableName);
        // The adapter's default retries (10 attempts), as in production.
        const state = new DynamoStateStore({ client: counted, tableName });
        const deps = {
          state,
          clock: () => new Date(),
          settings: { modelPrices: { scripted: { input: 1, output: 2 } } },
        } as unknown as EngineDeps;
        conflicts = 0;
        transactions = 0;
        latencies = [];
        let failed = 0;
        const began = performance.now();
        await Promise.all(
          Array.from({ length: n }, async (_, i) => {
            for (let k = 0; k < K; k++) {
              // The model call between two usage writes of one leaf.
              await new Promise((r) => setTimeout(r, Math.random() * THINK_MS));
              await write(deps, `${root}/plan.Task.leaf${i}`, { inputTokens: 100, outputTokens: 10 }).catch(
                () => {
                  failed++; // gave up after its retries: the step fails, Lambda runs it again
                },
              );
            }
          }),
        );
        const ms = performance.now() - began;
        const total = await usageOf(deps, root);
        lines.push(
          `${n} siblings x ${K} calls, ${layout}: ${transactions} transactions sent for ${n * K} usage writes, ` +
            `${conflicts} cancelled by TransactionConflict and retried, ${failed} gave up; ` +
            `root counted ${total.inputTokens / 100} of ${n * K - failed}; ${ms.toFixed(0)} ms ` +
            `(a transaction took ${median(latencies).toFixed(0)} ms, median)`,
        );
      }
    }
    process.stdout.write(`${lines.join("\n")}\n`);
    raw.destroy();
  } finally {
    child.kill("SIGKILL");
  }
}

await main();
