import { describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../../../shared/adapters/local/api-keys.ts";
import { CachedKeyStore } from "../../../../shared/channels/http/key-cache.ts";
import {
  type ApiKeyEntry,
  type Authenticated,
  bearerKeyHash,
  type KeyStore,
} from "../../../../shared/ports/key-store.ts";

/** A key store that counts its lookups and can be made to fail, over the in-memory keys. */
class CountingStore implements KeyStore {
  readonly inner = new ApiKeys({ keys: [] });
  lookups = 0;
  failNext = false;
  async authenticate(authorization: string | undefined | null): Promise<Authenticated | undefined> {
    const sha = bearerKeyHash(authorization);
    return sha === undefined ? undefined : this.lookup(sha);
  }
  async lookup(sha256: string): Promise<Authenticated | undefined> {
    this.lookups++;
    if (this.failNext) {
      this.failNext = false;
      throw new Error("table unavailable");
    }
    return this.inner.lookup(sha256);
  }
  list(tenant?: string) {
    return this.inner.list(tenant);
  }
  add(entry: ApiKeyEntry) {
    return this.inner.add(entry);
  }
  revoke(which: string, tenant?: string) {
    return this.inner.revoke(which, tenant);
  }
}

const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const stranger = newApiKey({ id: "user_x", kind: "human", tenant: "acme", roles: [] });
const TTL = 30_000;

function setup() {
  let now = 1_000_000;
  const backing = new CountingStore();
  const cache = new CachedKeyStore(backing, { ttlMs: TTL, now: () => now, maxEntries: 100 });
  return {
    backing,
    cache,
    advance: (ms: number) => {
      now += ms;
    },
    who: async (key: string) => (await cache.authenticate(`Bearer ${key}`))?.actor.id,
  };
}

describe("the key cache", () => {
  it("keeps a known key for its TTL: a key revoked elsewhere stops once the TTL has passed", async () => {
    const { backing, advance, who } = setup();
    await backing.add(ada.entry);
    expect(await who(ada.key)).toBe("user_ada");
    expect(await who(ada.key)).toBe("user_ada");
    expect(backing.lookups).toBe(1);
    await backing.revoke("user_ada"); // another instance revokes it: this cache does not know
    advance(TTL - 1);
    expect(await who(ada.key)).toBe("user_ada");
    advance(1);
    expect(await who(ada.key)).toBeUndefined();
    expect(backing.lookups).toBe(2);
  });

  it("keeps an unknown key too: a key added elsewhere counts once the TTL has passed", async () => {
    const { backing, advance, who } = setup();
    expect(await who(ada.key)).toBeUndefined();
    await backing.add(ada.entry);
    expect(await who(ada.key)).toBeUndefined();
    expect(backing.lookups).toBe(1);
    advance(TTL);
    expect(await who(ada.key)).toBe("user_ada");
  });

  it("keeps a key and its hash as one entry: a session's lookup shares the key's", async () => {
    const { backing, cache, who } = setup();
    await backing.add(ada.entry);
    expect(await who(ada.key)).toBe("user_ada");
    expect((await cache.lookup(ada.entry.sha256))?.actor.id).toBe("user_ada");
    expect(backing.lookups).toBe(1);
    await cache.revoke("user_ada");
    expect(await cache.lookup(ada.entry.sha256)).toBeUndefined();
  });

  it("looks nothing up for a request without a bearer key", async () => {
    const { backing, cache } = setup();
    for (const header of [undefined, null, "", "Basic abc", "Bearer short"])
      expect(await cache.authenticate(header)).toBeUndefined();
    expect(backing.lookups).toBe(0);
  });

  it("shares one lookup among concurrent requests with one key", async () => {
    const { backing, who } = setup();
    await backing.add(ada.entry);
    expect(await Promise.all([who(ada.key), who(ada.key), who(ada.key)])).toEqual([
      "user_ada",
      "user_ada",
      "user_ada",
    ]);
    expect(backing.lookups).toBe(1);
  });

  it("keeps no failed lookup: the next request asks again", async () => {
    const { backing, who } = setup();
    await backing.add(ada.entry);
    backing.failNext = true;
    await expect(who(ada.key)).rejects.toThrow("table unavailable");
    expect(await who(ada.key)).toBe("user_ada");
    expect(backing.lookups).toBe(2);
  });

  it("drops what it kept of a key written through it, so this process sees the write at once", async () => {
    const { cache, who } = setup();
    expect(await who(ada.key)).toBeUndefined();
    await cache.add(ada.entry);
    expect(await who(ada.key)).toBe("user_ada");
    await cache.revoke(ada.entry.sha256.slice(0, 12));
    expect(await who(ada.key)).toBeUndefined();
  });

  it("holds at most maxEntries keys, dropping the oldest", async () => {
    const { backing, who } = setup();
    await backing.add(ada.entry);
    expect(await who(ada.key)).toBe("user_ada");
    for (let i = 0; i < 150; i++) await who(`made-up-key-number-${i}`);
    const before = backing.lookups;
    expect(await who(ada.key)).toBe("user_ada"); // dropped long ago: read again
    expect(backing.lookups).toBe(before + 1);
    expect(await who(stranger.key)).toBeUndefined();
  });
});
