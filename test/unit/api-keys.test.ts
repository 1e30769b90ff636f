import { describe, expect, it } from "vitest";
import { ApiKeys, newApiKey } from "../../shared/channels/api-keys.ts";
import { ConfigError } from "../../shared/errors.ts";

describe("API keys", () => {
  it("stand for their person or agent, tenant and roles; anything else is nobody", () => {
    const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: ["admin"] });
    const partner = newApiKey({ id: "agent_partner", kind: "agent", tenant: "beta", roles: [] });
    const keys = new ApiKeys({ keys: [ada.entry, partner.entry] });
    expect(keys.authenticate(`Bearer ${ada.key}`)).toEqual({
      actor: { id: "user_ada", kind: "human" },
      caller: { tenant: "acme", roles: ["admin"] },
    });
    expect(keys.authenticate(`bearer ${partner.key}`)?.caller.tenant).toBe("beta");
    for (const header of [
      undefined,
      null,
      "",
      ada.key,
      `Basic ${ada.key}`,
      `Bearer ${ada.key}x`,
      "Bearer short",
    ])
      expect(keys.authenticate(header)).toBeUndefined();
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
});
