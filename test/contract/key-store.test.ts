import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ApiKeys, newApiKey, readApiKeysFile } from "../../shared/adapters/local/api-keys.ts";
import { FileKeyStore } from "../../shared/adapters/local/file-key-store.ts";
import { SqliteStateStore } from "../../shared/adapters/local/sqlite-state-store.ts";
import { StateKeyStore } from "../../shared/adapters/shared/state-key-store.ts";
import { CachedKeyStore } from "../../shared/channels/http/key-cache.ts";
import { keyStoreContract } from "./key-store.contract.ts";

keyStoreContract("in memory (ApiKeys)", async () => ({
  store: new ApiKeys({ keys: [] }),
  cleanup: async () => {},
}));

keyStoreContract("the keys file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-keystore-"));
  return {
    store: new FileKeyStore(join(dir, "data", "api-keys.json")),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

keyStoreContract("state store records (SQLite)", async () => {
  const state = new SqliteStateStore({ path: ":memory:" });
  return { store: new StateKeyStore(state), cleanup: () => state.close() };
});

keyStoreContract("a cache in front of the state store (SQLite)", async () => {
  const state = new SqliteStateStore({ path: ":memory:" });
  return { store: new CachedKeyStore(new StateKeyStore(state)), cleanup: () => state.close() };
});

describe("the keys file adapter", () => {
  it("writes the file whole, 0600, and checks requests against it at once", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-keystore-"));
    try {
      const file = join(dir, "api-keys.json");
      const keys = new ApiKeys({ keys: [] });
      const store = new FileKeyStore(file, keys);
      const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
      const bob = newApiKey({ id: "user_bob", kind: "human", tenant: "acme", roles: [] });
      await Promise.all([store.add(ada.entry), store.add(bob.entry)]); // one after the other
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      expect(readApiKeysFile(file)?.keys).toEqual([ada.entry, bob.entry]);
      expect(await keys.authenticate(`Bearer ${bob.key}`)).toBeDefined();
      await store.revoke("user_bob");
      expect(await keys.authenticate(`Bearer ${bob.key}`)).toBeUndefined();
      expect(readApiKeysFile(file)?.keys).toEqual([ada.entry]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("loses no change when two writers (two processes: arbor keys, serve's admin routes) share the file", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-keystore-"));
    try {
      const file = join(dir, "api-keys.json");
      const victim = newApiKey({ id: "user_victim", kind: "human", tenant: "acme", roles: [] });
      await new FileKeyStore(file).add(victim.entry);
      // Each store stands for a process of its own: it reads the file, changes it, renames it back.
      const added = Array.from({ length: 6 }, (_, i) =>
        newApiKey({ id: `user_u${i}`, kind: "human", tenant: "acme", roles: [] }),
      );
      const revoker = new FileKeyStore(file);
      const revoked = revoker.revoke("user_victim");
      await Promise.all([...added.map((k) => new FileKeyStore(file).add(k.entry)), revoked]);
      const kept = readApiKeysFile(file)?.keys.map((k) => k.id) ?? [];
      // Every add that said it was done is in the file, and the revoked key stays revoked.
      expect(kept.sort()).toEqual(added.map((k) => k.entry.id).sort());
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
