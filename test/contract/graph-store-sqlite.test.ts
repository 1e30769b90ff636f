import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DataFactory } from "n3";
import { describe, expect, it } from "vitest";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { StateGraphStore } from "../../shared/graph/state-graph-store.ts";
import type { StateStore } from "../../shared/ports/state-store.ts";
import { graphStoreContract } from "./graph-store.contract.ts";

/**
 * The graph on the local state store (SQLite, in memory and in a file). Each `open` is a graph
 * store with its own memory (its own loaded graphs) on the one state store, as the tools, the HTTP
 * API and the CLI of a data folder would be.
 */
graphStoreContract("state store on SQLite in memory", async () => {
  const store = new SqliteStateStore({ path: ":memory:" });
  return {
    open: (options = {}) => new StateGraphStore(store, options),
    cleanup: () => store.close(),
  };
});

graphStoreContract("state store on a SQLite file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-graph-"));
  const store = new SqliteStateStore({ path: join(dir, "state.db") });
  return {
    open: (options = {}) => new StateGraphStore(store, options),
    cleanup: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

describe("an add that loses the race to a removal of a triple it found there", () => {
  it("writes that triple again, rather than counting it as there and ending without it", async () => {
    const { namedNode: iri, variable: v } = DataFactory;
    const t = (s: string) => ({
      subject: iri(`urn:x:${s}`),
      predicate: iri("urn:x:p"),
      object: iri("urn:x:o"),
    });
    const state = new SqliteStateStore({ path: ":memory:" });
    try {
      const other = new StateGraphStore(state);
      await other.add("acme", [t("kept")]);
      // The first transaction of this writer waits until the other writer has removed `kept`: the
      // add found it there, then loses the race at the head.
      let first = true;
      const racing = new Proxy(state, {
        get(target, prop, receiver) {
          if (prop === "transact")
            return async (...args: Parameters<StateStore["transact"]>) => {
              if (first) {
                first = false;
                await other.remove("acme", [t("kept")]);
              }
              return target.transact(...args);
            };
          const value = Reflect.get(target, prop, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const writer = new StateGraphStore(racing);
      expect(await writer.add("acme", [t("kept"), t("new")])).toMatchObject({
        changed: 2,
        unchanged: 0,
        total: 2,
      });
      expect(first).toBe(false);
      const all = await new StateGraphStore(state).query("acme", [
        { subject: v("s"), predicate: v("p"), object: v("o") },
      ]);
      expect(all.bindings.map((b) => b.get("s")?.value).sort()).toEqual(["urn:x:kept", "urn:x:new"]);
    } finally {
      await state.close();
    }
  });
});

describe("two processes on one SQLite file, one of them only querying", () => {
  it("the one that only queries sees what the other added since it loaded the graph", async () => {
    const { namedNode: iri, variable: v } = DataFactory;
    const t = (s: string) => ({
      subject: iri(`urn:x:${s}`),
      predicate: iri("urn:x:p"),
      object: iri("urn:x:o"),
    });
    const all = [{ subject: v("s"), predicate: v("p"), object: v("o") }];
    const dir = await mkdtemp(join(tmpdir(), "arbor-graph-reader-"));
    const writerState = new SqliteStateStore({ path: join(dir, "state.db") });
    const readerState = new SqliteStateStore({ path: join(dir, "state.db") });
    try {
      const writer = new StateGraphStore(writerState);
      const reader = new StateGraphStore(readerState);
      await writer.add("acme", [t("a")]);
      await writerState.untilDurable();
      expect((await reader.query("acme", all)).bindings).toHaveLength(1); // loaded and kept
      await writer.add("acme", [t("b")]);
      await writerState.untilDurable();
      await new Promise((resolve) => setImmediate(resolve));
      expect((await reader.query("acme", all)).bindings).toHaveLength(2); // once: still 1
      expect(await reader.count("acme")).toBe(2);
    } finally {
      await writerState.close();
      await readerState.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
