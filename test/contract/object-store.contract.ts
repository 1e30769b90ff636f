import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { withMeta } from "../../shared/domain/resources.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { ValidationError } from "../../shared/kernel/errors.ts";
import {
  compareKeys,
  findByExtension,
  listAllKeys,
  type ObjectStore,
} from "../../shared/ports/object-store.ts";
import { ResourceStore } from "../../shared/store/resource-store.ts";

/**
 * The one contract every ObjectStore adapter passes. `setup` returns a fresh, empty store for
 * each test and a cleanup function.
 */
export interface ObjectStoreFixture {
  store: ObjectStore;
  cleanup(): Promise<void>;
}

const text = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString("utf8"));

async function putAll(store: ObjectStore, keys: readonly string[], concurrency = 32): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < keys.length) {
        const k = keys[next++] as string;
        await store.put(k, k);
      }
    }),
  );
}

export function objectStoreContract(name: string, setup: () => Promise<ObjectStoreFixture>): void {
  describe(`ObjectStore contract: ${name}`, () => {
    let fx: ObjectStoreFixture;
    let store: ObjectStore;
    beforeEach(async () => {
      fx = await setup();
      store = fx.store;
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it("stores and returns bytes and strings; a missing key is undefined", async () => {
      await store.put("a/one.json", '{"x":1}');
      const binary = new Uint8Array([0, 1, 2, 250, 255]);
      await store.put("a/two.bin", binary);
      expect(text(await store.get("a/one.json"))).toBe('{"x":1}');
      expect([...((await store.get("a/two.bin")) ?? [])]).toEqual([...binary]);
      expect(await store.get("a/missing.json")).toBeUndefined();
    });

    it("overwrites in place", async () => {
      await store.put("k.json", "first");
      await store.put("k.json", "second");
      expect(text(await store.get("k.json"))).toBe("second");
      expect(await listAllKeys(store, "")).toEqual(["k.json"]);
    });

    it("getMany returns documents in the order asked, undefined where missing", async () => {
      await putAll(store, ["m/1", "m/2", "m/3"]);
      const got = await store.getMany(["m/3", "m/nope", "m/1"]);
      expect(got.map(text)).toEqual(["m/3", undefined, "m/1"]);
    });

    it("delete removes a key and is idempotent", async () => {
      await store.put("d/x", "x");
      await store.delete("d/x");
      await store.delete("d/x");
      expect(await store.get("d/x")).toBeUndefined();
      expect(await listAllKeys(store, "d/")).toEqual([]);
    });

    it("lists a prefix of 2,500 keys: every key once, in byte order, across pages", async () => {
      const keys = Array.from(
        { length: 2500 },
        (_, i) => `big/item-${String((i * 7919) % 2500).padStart(5, "0")}.json`,
      );
      await putAll(store, [...keys, "bigger/outside.json", "bi/outside.json"]);
      let pages = 0;
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.list("big/", cursor === undefined ? {} : { cursor });
        pages++;
        expect(page.keys.length).toBeLessThanOrEqual(1000);
        seen.push(...page.keys);
        cursor = page.cursor;
      } while (cursor !== undefined);
      expect(pages).toBeGreaterThanOrEqual(3);
      expect(seen).toEqual([...keys].sort(compareKeys));
      expect(new Set(seen).size).toBe(2500);
    });

    it("pages by a small limit without skipping or repeating", async () => {
      const keys = Array.from({ length: 23 }, (_, i) => `p/${String(i).padStart(2, "0")}`);
      await putAll(store, keys);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await store.list("p/", cursor === undefined ? { limit: 5 } : { limit: 5, cursor });
        expect(page.keys.length).toBeLessThanOrEqual(5);
        seen.push(...page.keys);
        cursor = page.cursor;
      } while (cursor !== undefined);
      expect(seen).toEqual(keys);
    });

    it("takes a cursor it never gave (a caller's forgery) as bad input, never as the store being down", async () => {
      await putAll(store, ["p/a", "p/b", "q/secret"]);
      for (const cursor of ["garbage", Buffer.from("q/").toString("base64url")]) {
        // Either refused as input (400 to an HTTP caller), or a listing that stays within the prefix.
        const listed = await store.list("p/", { cursor }).then(
          (page) => page.keys,
          (error: unknown) => error,
        );
        if (Array.isArray(listed)) for (const k of listed) expect(k.startsWith("p/")).toBe(true);
        else expect([cursor, listed]).toEqual([cursor, expect.any(ValidationError)]);
      }
    });

    it("finds the keys of one extension below a prefix, at any depth, in key order", async () => {
      await putAll(store, [
        "docs/guide.md",
        "docs/a/notes.md",
        "docs/a/notes.md.bak",
        "docs/a/scan.pdf",
        "docs/README.MD",
        "docs/.md",
        "docsx/other.md",
        "elsewhere/x.md",
      ]);
      expect(await findByExtension(store, "docs/", "md")).toEqual([
        "docs/.md",
        "docs/a/notes.md",
        "docs/guide.md",
      ]);
      expect(await findByExtension(store, "docs/", "pdf")).toEqual(["docs/a/scan.pdf"]);
      expect(await findByExtension(store, "docs/", "md", { limit: 2 })).toEqual([
        "docs/.md",
        "docs/a/notes.md",
      ]);
      expect(await findByExtension(store, "nothing/", "md")).toEqual([]);
      for (const bad of ["", ".md", "m/d", "md*", "x".repeat(17)])
        await expect(findByExtension(store, "docs/", bad)).rejects.toBeInstanceOf(ValidationError);
    });

    it("finds by extension across pages of the listing", async () => {
      const keys = Array.from(
        { length: 1203 },
        (_, i) => `many/${String(i).padStart(4, "0")}.${i % 3 ? "json" : "pdf"}`,
      );
      await putAll(store, keys);
      const pdfs = await findByExtension(store, "many/", "pdf", { limit: 5000 });
      expect(pdfs).toEqual(keys.filter((k) => k.endsWith(".pdf")));
      expect(pdfs).toHaveLength(401);
    });

    it("a prefix may end inside a segment", async () => {
      await putAll(store, ["t/conv-1.json", "t/conv-2.json", "t/other.json", "t/conv-1/child.json"]);
      expect(await listAllKeys(store, "t/conv-")).toEqual([
        "t/conv-1.json",
        "t/conv-1/child.json",
        "t/conv-2.json",
      ]);
    });

    it("a delimiter separates children (keys) from deeper levels (prefixes)", async () => {
      await putAll(store, ["r/a.json", "r/a/b.json", "r/a/b/c.json", "r/z.json", "r/y/deep/only.json"]);
      const page = await store.list("r/", { delimiter: "/" });
      expect(page.keys).toEqual(["r/a.json", "r/z.json"]);
      expect(page.prefixes).toEqual(["r/a/", "r/y/"]);
      expect(await listAllKeys(store, "r/")).toEqual([
        "r/a.json",
        "r/a/b.json",
        "r/a/b/c.json",
        "r/y/deep/only.json",
        "r/z.json",
      ]);
    });

    it("holds a key and keys below it side by side", async () => {
      await store.put("s/a", "leaf");
      await store.put("s/a/b", "below");
      expect(text(await store.get("s/a"))).toBe("leaf");
      expect(text(await store.get("s/a/b"))).toBe("below");
      expect(await listAllKeys(store, "s/")).toEqual(["s/a", "s/a/b"]);
    });

    it("orders non-ASCII keys by UTF-8 bytes and round-trips them", async () => {
      const keys = ["u/é.json", "u/z.json", "u/日本.json", "u/A.json", "u/with space.json"];
      await putAll(store, keys);
      expect(await listAllKeys(store, "u/")).toEqual([...keys].sort(compareKeys));
      expect(text(await store.get("u/日本.json"))).toBe("u/日本.json");
    });

    it("rejects keys that are unsafe or differ across backends, writing nothing", async () => {
      for (const bad of [
        "",
        "/abs",
        "a/../b",
        "a//b",
        "a/./b",
        "tab\tkey",
        "back\\slash",
        "x".repeat(1100),
        "日".repeat(342), // 342 characters, 1,026 bytes
        "a/",
        ".",
        "..",
        "a/..",
      ]) {
        await expect(store.put(bad, "v"), bad).rejects.toBeInstanceOf(ValidationError);
      }
      expect(await listAllKeys(store, "")).toEqual([]);
    });

    it("accepts dots inside segments and multi-byte keys up to the byte limit", async () => {
      // 791 characters (more than a third of the limit), 919 bytes; short segments (files encode them).
      const long = Array.from({ length: 8 }, () => `${"日".repeat(8)}${"x".repeat(90)}`).join("/");
      const keys = [".hidden/x", "a/..b", "a/b..", "v1.2/x.json", long];
      await putAll(store, keys);
      expect(await listAllKeys(store, "")).toEqual([...keys].sort(compareKeys));
    });

    describe("ResourceStore over this adapter", () => {
      const tenant = tenantUrn("acme");
      const conv = withMeta({ type: "common.Conversation", name: "support chat", parent: tenant });
      const msg = withMeta({ type: "common.Message", name: "hello", parent: conv.id });
      const task = withMeta({
        type: "plan.Task",
        name: "answer",
        parent: msg.id,
        purpose: "Answer the question",
      });
      const sub = withMeta({ type: "plan.Task", name: "look up", parent: task.id });

      it("writes, reads back typed resources, and tells children from descendants", async () => {
        const rs = new ResourceStore(store);
        await rs.put({
          meta: withMeta({ type: "common.Tenant", name: "acme", id: "acme" }),
          displayName: "Acme",
        });
        await rs.put({ meta: conv, channel: { kind: "cli" } });
        await rs.put({ meta: msg, role: "user", content: "How do I reset my password?" });
        await rs.put({ meta: task });
        await rs.put({ meta: sub });

        const got = await rs.get(task.id);
        expect(got?.meta.type).toBe("plan.Task");
        const typed = await rs.getAs("plan.Task", task.id);
        expect(typed?.priority).toBe("normal"); // schema default applied on write
        expect(await rs.getAs("common.Message", task.id).catch((e: unknown) => e)).toBeInstanceOf(
          ValidationError,
        );
        expect(got?.meta.purpose).toBe("Answer the question");

        expect(await rs.childUrns(conv.id)).toEqual([msg.id]);
        expect(await rs.descendantUrns(conv.id)).toEqual([msg.id, task.id, sub.id]);
        expect(await rs.descendantUrns(conv.id, "plan.Task")).toEqual([task.id, sub.id]);
        expect((await rs.ancestorsOf(sub.id)).map((r) => r.meta.type)).toEqual([
          "common.Tenant",
          "common.Conversation",
          "common.Message",
          "plan.Task",
        ]);
      });

      it("rejects an invalid resource with the bad fields named, and writes nothing", async () => {
        const rs = new ResourceStore(store);
        const bad = { meta: msg, role: "robot", content: 42 };
        const err = await rs.put(bad).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ValidationError);
        expect((err as ValidationError).issues.join("\n")).toMatch(/role/);
        expect((err as ValidationError).issues.join("\n")).toMatch(/content/);
        expect(await rs.get(msg.id)).toBeUndefined();
        expect(await listAllKeys(store, "")).toEqual([]);
      });

      it("rejects meta that contradicts its own URN", async () => {
        const rs = new ResourceStore(store);
        await expect(
          rs.put({ meta: { ...task, type: "common.Message" }, role: "user", content: "x" }),
        ).rejects.toThrow(/meta\.type/);
        await expect(rs.put({ meta: { ...sub, parent: conv.id } })).rejects.toThrow(/meta\.parent/);
        expect(await listAllKeys(store, "")).toEqual([]);
      });
    });
  });
}
