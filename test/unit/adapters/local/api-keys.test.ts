import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ApiKeys, newApiKey, reloadApiKeys } from "../../../../shared/adapters/local/api-keys.ts";
import { ConfigError, UnavailableError } from "../../../../shared/kernel/errors.ts";

describe("API keys", () => {
  it("stand for their person or agent, tenant and roles; anything else is nobody", async () => {
    const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
    const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "beta", roles: [] });
    const keys = new ApiKeys({ keys: [ada.entry, partner.entry] });
    expect(await keys.authenticate(`Bearer ${ada.key}`)).toEqual({
      actor: { id: "user_ada", kind: "human", capabilities: ["admin"] },
      caller: { tenant: "acme", roles: ["admin"] },
    });
    expect((await keys.authenticate(`bearer ${partner.key}`))?.caller.tenant).toBe("beta");
    for (const header of [
      undefined,
      null,
      "",
      ada.key,
      `Basic ${ada.key}`,
      `Bearer ${ada.key}x`,
      "Bearer short",
    ])
      expect(await keys.authenticate(header)).toBeUndefined();
    // Only the hash is kept: the entry does not contain the key.
    expect(JSON.stringify(ada.entry)).not.toContain(ada.key);
  });

  it("refuse a bad file, naming the field", () => {
    const entry = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] }).entry;
    const bad = (e: object) => () => ApiKeys.parse({ keys: [{ ...entry, ...e }] }, "keys.json");
    expect(bad({ tenant: "no spaces" })).toThrow(/keys\.0\.tenant/);
    expect(bad({ sha256: "abc" })).toThrow(/keys\.0\.sha256/);
    expect(bad({ kind: "agent" })).toThrow(/keys\.0\.id: a person's id starts with user_/);
    expect(bad({ extra: 1 })).toThrow(ConfigError);
  });

  it("reload from the file: gone or empty lets nobody in, invalid fails closed saying why, valid takes its keys", async () => {
    const dir = await mkdtemp(join(tmpdir(), "arbor-keys-"));
    try {
      const file = join(dir, "keys.json");
      const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
      const bea = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });
      const keys = new ApiKeys({ keys: [ada.entry] });
      const who = async () => (await keys.authenticate(`Bearer ${ada.key}`))?.actor.id;
      const tenantsSeen: string[][] = [];
      const reload = () => reloadApiKeys(file, keys, async (t) => void tenantsSeen.push([...t]));

      expect(await reload()).toEqual({ state: "none", why: "gone" });
      expect(await who()).toBeUndefined();
      await writeFile(file, JSON.stringify({ keys: [ada.entry, bea.entry] }));
      expect(await reload()).toEqual({ state: "keys", count: 2 });
      expect(await who()).toBe("user_ada");
      expect(tenantsSeen).toEqual([["acme", "beta"]]);
      for (const empty of ["", "  \n", '{"keys":[]}']) {
        await writeFile(file, empty);
        expect(await reload()).toEqual({ state: "none", why: "empty" });
        expect(await who()).toBeUndefined();
      }
      await writeFile(file, JSON.stringify({ keys: [ada.entry] }));
      await reload();
      await writeFile(file, JSON.stringify({ keys: [{ ...ada.entry, tenant: "a b" }] }));
      expect(await reload()).toMatchObject({
        state: "invalid",
        reason: expect.stringMatching(/keys\.0\.tenant/),
      });
      await expect(who()).rejects.toThrow(UnavailableError);
      await expect(keys.authenticate(undefined)).rejects.toThrow(
        /API keys file is not valid \(keys\.0\.tenant/,
      );
      // What callers read never names the file's path (the log does).
      await expect(keys.authenticate(undefined)).rejects.not.toThrow(dir);
      await writeFile(file, JSON.stringify({ keys: [ada.entry] }));
      expect(await reload()).toEqual({ state: "keys", count: 1 });
      expect(await who()).toBe("user_ada");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
