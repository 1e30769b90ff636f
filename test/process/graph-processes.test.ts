import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DataFactory } from "n3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { StateGraphStore } from "../../shared/graph/state-graph-store.ts";
import { node } from "../support/arbor-process.ts";

/**
 * Several processes adding to one tenant's graph in one SQLite file at once (tool services, a CLI
 * beside `arbor serve`): each a real process with its own connection and its own loaded graphs.
 * No triple is lost, and the tenant's cap holds however the writers race for it.
 */
const WRITER = join(import.meta.dirname, "graph-writer-process.ts");
const { variable: v } = DataFactory;

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-graph-processes-"));
  file = join(dir, "state.db");
  await new SqliteStateStore({ path: file }).close(); // the file exists, as a data folder's does
});
afterEach(() => rm(dir, { recursive: true, force: true }));

async function writers(cap: number): Promise<string[]> {
  const runs = ["a", "b", "c"].map((name) => node([WRITER, file, name, String(cap)]));
  return (await Promise.all(runs)).flatMap(({ code, stdout, stderr }) => {
    if (code !== 0) throw new Error(`a writer exited ${code}: ${stderr}`);
    return (JSON.parse(stdout.trim()) as { outcomes: string[] }).outcomes;
  });
}

async function stored(): Promise<{ count: number; rows: number }> {
  const state = new SqliteStateStore({ path: file });
  try {
    const graph = new StateGraphStore(state);
    const all = await graph.query("acme", [{ subject: v("s"), predicate: v("p"), object: v("o") }], {
      limit: 100,
    });
    return { count: await graph.count("acme"), rows: all.bindings.length + (all.more ? 1_000 : 0) };
  } finally {
    await state.close();
  }
}

describe("three processes adding to one graph at once", () => {
  it("lose no triple: 150 added, 150 there", async () => {
    const outcomes = await writers(10_000);
    expect(outcomes.filter((o) => o !== "added 5")).toEqual([]);
    const { count } = await stored();
    expect(count).toBe(150);
  }, 120_000);

  it("hold the tenant's cap between them: exactly as many adds as fit succeed, the rest are refused saying why", async () => {
    const outcomes = await writers(62); // room for 12 adds of 5, and 2 triples the 13th cannot take
    const added = outcomes.filter((o) => o === "added 5");
    const refused = outcomes.filter((o) => o !== "added 5");
    expect(added).toHaveLength(12);
    expect(refused).toHaveLength(18);
    for (const r of refused)
      expect(r).toMatch(/^TooLargeError: .*would pass its cap of 62: remove some first/);
    expect(await stored()).toEqual({ count: 60, rows: 60 });
  }, 120_000);
});
