import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ISSUER } from "../peers/fake-teams.ts";
import { AAD_TENANT, startTeamsWorld, stopTeamsWorld, type TeamsWorld } from "./teams-world.ts";

/**
 * Every activity's token is checked before anything of it is used: a token that fails any check,
 * or an activity its token does not vouch for, is refused (401; 403 for a tenant Arbor does not
 * serve) and nothing is written.
 */
let w: TeamsWorld;
beforeAll(async () => {
  w = await startTeamsWorld();
});
afterAll(() => stopTeamsWorld(w));

const nowS = () => Math.floor(w.h.now / 1000);
const good = () => ({
  iss: ISSUER,
  aud: w.settings.appId,
  nbf: nowS() - 10,
  iat: nowS() - 10,
  exp: nowS() + 3600,
  serviceurl: w.teams.serviceUrl,
});

async function refused(
  activity: Record<string, unknown>,
  auth: string | null | undefined,
  status: number,
  reason: RegExp,
): Promise<void> {
  const before = await w.written();
  const res = await w.send(activity, auth);
  expect(res.status).toBe(status);
  expect(((await res.json()) as { error: string }).error).toMatch(reason);
  await w.h.idle();
  expect(await w.written()).toBe(before);
  expect(w.teams.activities).toEqual([]);
}

describe("Teams activity tokens", () => {
  it("refuses an activity without a bearer token", async () => {
    await refused(w.message("no token"), null, 401, /Bearer token is required/);
    await refused(w.message("basic"), "Basic YTpi", 401, /Bearer token is required/);
  });

  it("refuses a wrong issuer, a wrong audience, an expired token and one not valid yet", async () => {
    const m = w.message("bad claims");
    await refused(m, `Bearer ${await w.teams.sign({ ...good(), iss: "https://evil.example" })}`, 401, /iss/);
    await refused(m, `Bearer ${await w.teams.sign({ ...good(), aud: "another-bot" })}`, 401, /aud/);
    // Expired beyond the 5 minutes of clock tolerance...
    await refused(m, `Bearer ${await w.teams.sign({ ...good(), exp: nowS() - 301 })}`, 401, /expired/);
    // ...or starting more than 5 minutes from now.
    await refused(m, `Bearer ${await w.teams.sign({ ...good(), nbf: nowS() + 600 })}`, 401, /nbf/);
    // No expiry at all.
    const { exp: _exp, ...noExp } = good();
    await refused(m, `Bearer ${await w.teams.sign(noExp)}`, 401, /exp/);
  });

  it("takes a token within the clock tolerance", async () => {
    const res = await w.send(
      { type: "conversationUpdate", ...w.message("") },
      `Bearer ${await w.teams.sign({ ...good(), exp: nowS() - 60 })}`,
    );
    expect(res.status).toBe(200);
  });

  it("refuses alg none, HS256 and a signature by a key that is not published", async () => {
    const m = w.message("bad algorithm");
    await refused(
      m,
      `Bearer ${await w.teams.sign(good(), { alg: "none" })}`,
      401,
      /algorithm none is refused/,
    );
    await refused(
      m,
      `Bearer ${await w.teams.sign(good(), { alg: "HS256" })}`,
      401,
      /algorithm HS256 is refused/,
    );
    await refused(m, `Bearer ${await w.teams.sign(good(), { unpublished: true })}`, 401, /signature/);
    await refused(m, "Bearer not.a.jwt", 401, /not a JWT/);
  });

  it("refreshes the key set once for an unknown kid, and not again for the next one soon after", async () => {
    const m = w.message("unknown kid");
    // The key set was fetched for the tokens above; five minutes on, it may be fetched again.
    w.h.advance(5 * 60_000 + 1);
    const fetches = w.teams.keyFetches;
    await refused(
      m,
      `Bearer ${await w.teams.sign(good(), { kid: "k-unknown-1" })}`,
      401,
      /not in the published key set/,
    );
    expect(w.teams.keyFetches).toBe(fetches + 1);
    // Made-up kids cannot make Arbor fetch the key set again and again.
    await refused(
      m,
      `Bearer ${await w.teams.sign(good(), { kid: "k-unknown-2" })}`,
      401,
      /not in the published key set/,
    );
    await refused(
      m,
      `Bearer ${await w.teams.sign(good(), { kid: "k-unknown-1" })}`,
      401,
      /not in the published key set/,
    );
    expect(w.teams.keyFetches).toBe(fetches + 1);
    // Five minutes on, an unknown kid may refresh it once more.
    w.h.advance(5 * 60_000 + 1);
    await refused(
      m,
      `Bearer ${await w.teams.sign(good(), { kid: "k-unknown-3" })}`,
      401,
      /not in the published key set/,
    );
    expect(w.teams.keyFetches).toBe(fetches + 2);
  });

  it("refuses an activity whose service URL is not the token's", async () => {
    const m = w.message("other service url");
    const other = `${w.teams.base}/elsewhere/`;
    await refused(
      m,
      `Bearer ${await w.teams.sign({ ...good(), serviceurl: other })}`,
      401,
      /service URL does not match/,
    );
    await refused(m, `Bearer ${await w.teams.sign({ ...good(), serviceurl: "" })}`, 401, /service URL/);
  });

  it("refuses a service URL that is not allowed, even when the token vouches for it", async () => {
    const other = `${w.teams.base}/elsewhere/`;
    const m = { ...w.message("not allowed"), serviceUrl: other };
    await refused(
      m,
      `Bearer ${await w.teams.sign({ ...good(), serviceurl: other })}`,
      401,
      /not an allowed one/,
    );
    const metadata = { ...w.message("metadata"), serviceUrl: "http://169.254.169.254/latest/" };
    await refused(
      metadata,
      `Bearer ${await w.teams.sign({ ...good(), serviceurl: "http://169.254.169.254/latest/" })}`,
      401,
      /not an allowed one/,
    );
  });

  it("refuses an activity from a channel the signing key is not endorsed for", async () => {
    await refused({ ...w.message("webchat"), channelId: "webchat" }, undefined, 401, /not endorsed/);
  });

  it("refuses a tenant Arbor does not serve with 403", async () => {
    const m = w.message("other tenant");
    const foreign = {
      ...m,
      conversation: { ...(m.conversation as object), tenantId: "aad-other" },
      channelData: { tenant: { id: "aad-other" } },
    };
    await refused(foreign, undefined, 403, /not configured/);
  });

  it("takes a good token for the configured tenant (the check is not refusing everything)", async () => {
    expect(AAD_TENANT).toBe("aad-tenant-1");
    const res = await w.send({ ...w.message(""), type: "typing" });
    expect(res.status).toBe(200);
  });
});
