import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { ArborError, ConflictError, ValidationError } from "../../shared/kernel/errors.ts";
import type { ApiKeyEntry, KeyStore } from "../../shared/ports/key-store.ts";

/** The one contract every KeyStore adapter passes. `setup` returns a fresh, empty store per test. */
export interface KeyStoreFixture {
  store: KeyStore;
  cleanup(): Promise<void>;
}

const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
const ada2 = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const bot = newApiKey({ id: "agent_bot", kind: "agent", tenant: "acme", roles: [] });
const bea = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });
/** Same principal id, other tenant. */
const adaBeta = newApiKey({ id: "user_ada", kind: "human", tenant: "beta", roles: [] });

const sorted = (keys: readonly ApiKeyEntry[]) => keys.map((k) => k.sha256).sort();
const bearer = (key: string) => `Bearer ${key}`;

export function keyStoreContract(name: string, setup: () => Promise<KeyStoreFixture>): void {
  describe(`KeyStore contract: ${name}`, () => {
    let fx: KeyStoreFixture;
    let store: KeyStore;
    beforeEach(async () => {
      fx = await setup();
      store = fx.store;
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it("an added key authenticates as its principal, tenant and roles; nothing else does", async () => {
      expect(await store.authenticate(bearer(ada.key))).toBeUndefined();
      await store.add(ada.entry);
      expect(await store.authenticate(bearer(ada.key))).toEqual({
        actor: { id: "user_ada", kind: "human", capabilities: ["admin"] },
        caller: { tenant: "acme", roles: ["admin"] },
      });
      expect(await store.authenticate(`bearer  ${ada.key} `)).toMatchObject({ actor: { id: "user_ada" } });
      for (const header of [
        undefined,
        null,
        "",
        ada.key,
        `Basic ${ada.key}`,
        bearer(`${ada.key}x`),
        "Bearer short",
      ])
        expect(await store.authenticate(header)).toBeUndefined();
    });

    it("looks a key up by its sha256, as a console session does: a revoked key is gone", async () => {
      expect(await store.lookup(ada.entry.sha256)).toBeUndefined();
      await store.add(ada.entry);
      expect(await store.lookup(ada.entry.sha256)).toEqual({
        actor: { id: "user_ada", kind: "human", capabilities: ["admin"] },
        caller: { tenant: "acme", roles: ["admin"] },
      });
      for (const sha of ["", "x", ada.entry.sha256.toUpperCase(), `${ada.entry.sha256}0`, bot.entry.sha256])
        expect(await store.lookup(sha)).toBeUndefined();
      await store.revoke("user_ada");
      expect(await store.lookup(ada.entry.sha256)).toBeUndefined();
    });

    it("lists keys by tenant (or all), never with the key itself", async () => {
      for (const k of [ada, bot, bea]) await store.add(k.entry);
      expect(sorted(await store.list("acme"))).toEqual(sorted([ada.entry, bot.entry]));
      expect(sorted(await store.list("beta"))).toEqual([bea.entry.sha256]);
      expect(await store.list("gamma")).toEqual([]);
      expect(sorted(await store.list())).toEqual(sorted([ada.entry, bot.entry, bea.entry]));
      expect(await store.list("acme")).toContainEqual(ada.entry);
      expect(JSON.stringify(await store.list())).not.toContain(ada.key);
    });

    it("refuses a key twice, and an entry that is not valid, changing nothing", async () => {
      await store.add(ada.entry);
      await expect(store.add(ada.entry)).rejects.toBeInstanceOf(ConflictError);
      await expect(store.add({ ...bot.entry, tenant: "no spaces" })).rejects.toThrow(/tenant/);
      await expect(store.add({ ...bot.entry, kind: "human" })).rejects.toThrow(/user_/);
      expect(sorted(await store.list())).toEqual([ada.entry.sha256]);
    });

    it("revokes one key by fingerprint, or every key of a principal by id; revoked keys stop", async () => {
      for (const k of [ada, ada2, bot, adaBeta]) await store.add(k.entry);
      const one = await store.revoke(ada.entry.sha256.slice(0, 12));
      expect(one).toEqual([ada.entry]);
      expect(await store.authenticate(bearer(ada.key))).toBeUndefined();
      expect(await store.authenticate(bearer(ada2.key))).toBeDefined();
      // Within a tenant: the same id in another tenant is left alone.
      const all = await store.revoke("user_ada", "acme");
      expect(sorted(all)).toEqual([ada2.entry.sha256]);
      expect(await store.authenticate(bearer(ada2.key))).toBeUndefined();
      expect(await store.authenticate(bearer(adaBeta.key))).toBeDefined();
      expect(sorted(await store.list())).toEqual(sorted([bot.entry, adaBeta.entry]));
    });

    it("says what is wrong when nothing (or too much) matches, and removes nothing", async () => {
      for (const k of [bot, bea]) await store.add(k.entry);
      const missing = store.revoke("user_nobody");
      await expect(missing).rejects.toBeInstanceOf(ArborError);
      await expect(missing).rejects.toMatchObject({ code: "NOT_FOUND" });
      await expect(store.revoke("user_nobody")).rejects.toThrow(/has the id or fingerprint "user_nobody"/);
      // Another tenant's key is not found from this one.
      await expect(store.revoke(bea.entry.sha256.slice(0, 12), "acme")).rejects.toMatchObject({
        code: "NOT_FOUND",
      });
      // A fingerprint prefix shared by two keys names neither.
      const twins = [0, 1].map((i) =>
        newApiKey({ id: `user_twin${i}`, kind: "human", tenant: "acme", roles: [] }),
      );
      const prefix = "abcdef12";
      for (const [i, t] of twins.entries())
        await store.add({ ...t.entry, sha256: `${prefix}${String(i).repeat(56)}` });
      await expect(store.revoke(prefix)).rejects.toBeInstanceOf(ValidationError);
      expect((await store.list()).length).toBe(4);
    });
  });
}
