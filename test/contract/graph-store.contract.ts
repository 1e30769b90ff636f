import { DataFactory } from "n3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  GRAPH_LIMITS,
  type GraphStore,
  type Triple,
  type TriplePattern,
} from "../../shared/graph/graph-store.ts";
import { TooLargeError, ValidationError } from "../../shared/kernel/errors.ts";

const { namedNode: iri, literal, variable: v } = DataFactory;

/**
 * The one contract every GraphStore adapter passes. `setup` gives a fresh, empty backing store;
 * `open` makes a graph store on it (each call: another process's, with its own memory), given the
 * per-tenant cap of triples.
 */
export interface GraphStoreFixture {
  open(options?: { maxTriples?: number }): GraphStore;
  cleanup(): Promise<void>;
}

const S = "https://schema.org/";
const XSD = "http://www.w3.org/2001/XMLSchema#";
export const t = (s: string, p: string, o: string | ReturnType<typeof literal>): Triple => ({
  subject: iri(`urn:x:${s}`),
  predicate: iri(`${S}${p}`),
  object: typeof o === "string" ? iri(`urn:x:${o}`) : o,
});
const names = (rows: { bindings: ReadonlyMap<string, { value: string }>[] }, name: string) =>
  rows.bindings.map((b) => b.get(name)?.value).sort();

export function graphStoreContract(name: string, setup: () => Promise<GraphStoreFixture>): void {
  describe(`GraphStore contract: ${name}`, () => {
    let fx: GraphStoreFixture;
    let graph: GraphStore;
    beforeEach(async () => {
      fx = await setup();
      graph = fx.open();
    });
    afterEach(() => fx.cleanup());

    it("adds triples once, however often they are added, and finds them by any pattern", async () => {
      const ada = t("ada", "name", literal("Ada", "en"));
      expect(await graph.add("acme", [ada, t("ada", "knows", "bob")])).toMatchObject({
        changed: 2,
        unchanged: 0,
        total: 2,
      });
      expect(await graph.add("acme", [ada, ada])).toMatchObject({ changed: 0, unchanged: 1, total: 2 });
      expect(await graph.count("acme")).toBe(2);
      const byName = await graph.query("acme", [
        { subject: v("who"), predicate: iri(`${S}name`), object: literal("Ada", "en") },
      ]);
      expect(names(byName, "who")).toEqual(["urn:x:ada"]);
      const all = await graph.query("acme", [{ subject: v("s"), predicate: v("p"), object: v("o") }]);
      expect(all.bindings).toHaveLength(2);
      expect(all.more).toBe(false);
    });

    it("keeps literals apart by language and datatype", async () => {
      await graph.add("acme", [
        t("n", "value", literal("42")),
        t("n", "value", literal("42", iri(`${XSD}integer`))),
        t("n", "value", literal("42", "en")),
      ]);
      expect(await graph.count("acme")).toBe(3);
      const typed = await graph.query("acme", [
        { subject: v("s"), predicate: iri(`${S}value`), object: literal("42", iri(`${XSD}integer`)) },
      ]);
      expect(typed.bindings).toHaveLength(1);
    });

    it("joins patterns on shared variables, honours a repeated variable, and stops at the limit", async () => {
      await graph.add("acme", [
        t("ada", "knows", "bob"),
        t("bob", "knows", "cy"),
        t("cy", "knows", "cy"),
        t("bob", "worksFor", "acme"),
        t("cy", "worksFor", "beta"),
      ]);
      const friendsAtAcme = await graph.query("acme", [
        { subject: v("a"), predicate: iri(`${S}knows`), object: v("b") },
        { subject: v("b"), predicate: iri(`${S}worksFor`), object: iri("urn:x:acme") },
      ]);
      expect(names(friendsAtAcme, "a")).toEqual(["urn:x:ada"]);
      const selves = await graph.query("acme", [
        { subject: v("x"), predicate: iri(`${S}knows`), object: v("x") },
      ]);
      expect(names(selves, "x")).toEqual(["urn:x:cy"]);
      const limited = await graph.query("acme", [{ subject: v("s"), predicate: v("p"), object: v("o") }], {
        limit: 2,
      });
      expect(limited).toMatchObject({ more: true });
      expect(limited.bindings).toHaveLength(2);
      const none = await graph.query("acme", [
        { subject: v("a"), predicate: iri(`${S}knows`), object: v("b") },
        { subject: v("b"), predicate: iri(`${S}worksFor`), object: iri("urn:x:nowhere") },
      ]);
      expect(none).toEqual({ bindings: [], more: false });
    });

    it("keeps tenants apart: one tenant's triples are not another's", async () => {
      await graph.add("acme", [t("secret", "name", literal("acme only"))]);
      const any: TriplePattern[] = [{ subject: v("s"), predicate: v("p"), object: v("o") }];
      expect((await graph.query("beta", any)).bindings).toEqual([]);
      expect(await graph.count("beta")).toBe(0);
      await graph.add("beta", [t("mine", "name", literal("beta"))]);
      expect(names(await graph.query("acme", any), "s")).toEqual(["urn:x:secret"]);
      expect(names(await graph.query("beta", any), "s")).toEqual(["urn:x:mine"]);
      await graph.remove("beta", any);
      expect(await graph.count("acme")).toBe(1);
    });

    it("removes exact triples and patterns, at most a call's worth at a time", async () => {
      await graph.add("acme", [t("a", "knows", "b"), t("a", "knows", "c"), t("a", "name", literal("A"))]);
      expect(await graph.remove("acme", [t("a", "knows", "b")])).toMatchObject({ changed: 1, total: 2 });
      expect(await graph.remove("acme", [t("a", "knows", "b")])).toMatchObject({ changed: 0, total: 2 });
      expect(
        await graph.remove("acme", [
          { subject: iri("urn:x:a"), predicate: iri(`${S}knows`), object: v("o") },
        ]),
      ).toMatchObject({ changed: 1, total: 1 });
      const many = Array.from({ length: GRAPH_LIMITS.triplesPerCall }, (_, i) => t(`m${i}`, "p", "q"));
      await graph.add("acme", many);
      await graph.add("acme", [t("m-last", "p", "q")]);
      const pattern = { subject: v("s"), predicate: iri(`${S}p`), object: iri("urn:x:q") };
      expect(await graph.remove("acme", [pattern])).toMatchObject({
        changed: GRAPH_LIMITS.triplesPerCall,
        more: true,
      });
      expect(await graph.remove("acme", [pattern])).toMatchObject({ changed: 1, more: false, total: 1 });
    });

    it("refuses more than a call's worth, nothing at all, and past the tenant's cap, changing nothing", async () => {
      const capped = fx.open({ maxTriples: 3 });
      const over = Array.from({ length: GRAPH_LIMITS.triplesPerCall + 1 }, (_, i) => t(`x${i}`, "p", "q"));
      await expect(capped.add("acme", over)).rejects.toThrow(ValidationError);
      await expect(capped.add("acme", [])).rejects.toThrow(ValidationError);
      await capped.add("acme", [t("a", "p", "1"), t("b", "p", "1")]);
      const refused = capped.add("acme", [t("c", "p", "1"), t("d", "p", "1")]);
      await expect(refused).rejects.toThrow(TooLargeError);
      await expect(refused).rejects.toThrow(/holds 2 triples; adding 2 would pass its cap of 3/);
      expect(await capped.count("acme")).toBe(2);
      // What is there already does not count against the cap.
      expect(await capped.add("acme", [t("a", "p", "1"), t("c", "p", "1")])).toMatchObject({
        changed: 1,
        total: 3,
      });
      await expect(graph.add("not a tenant!", [t("a", "p", "1")])).rejects.toThrow(ValidationError);
    });

    it("never loses a concurrent writer's triples (writers in several processes at once)", async () => {
      const writers = Array.from({ length: 6 }, () => fx.open());
      await Promise.all(
        writers.map((w, i) =>
          w.add(
            "acme",
            Array.from({ length: 5 }, (_, j) => t(`w${i}-${j}`, "p", "q")),
          ),
        ),
      );
      // And a concurrent remove and add on the same graph.
      await Promise.all([
        writers[0]?.remove("acme", [t("w0-0", "p", "q")]),
        writers[1]?.add("acme", [t("late", "p", "q")]),
      ]);
      for (const w of [graph, ...writers]) expect(await w.count("acme")).toBe(30);
      const all = await writers[5]?.query("acme", [{ subject: v("s"), predicate: v("p"), object: v("o") }], {
        limit: 100,
      });
      expect(all?.bindings).toHaveLength(30);
      expect(names(all ?? { bindings: [] }, "s")).not.toContain("urn:x:w0-0");
    });

    it("a process sees what another wrote after it loaded the graph", async () => {
      const other = fx.open();
      const any: TriplePattern[] = [{ subject: v("s"), predicate: v("p"), object: v("o") }];
      await graph.add("acme", [t("a", "p", "1")]);
      expect((await other.query("acme", any)).bindings).toHaveLength(1); // loaded, kept
      await graph.add("acme", [t("b", "p", "1")]);
      await graph.remove("acme", [t("a", "p", "1")]);
      expect(names(await other.query("acme", any), "s")).toEqual(["urn:x:b"]);
      await other.add("acme", [t("c", "p", "1")]);
      expect(names(await graph.query("acme", any), "s")).toEqual(["urn:x:b", "urn:x:c"]);
    });
  });
}
