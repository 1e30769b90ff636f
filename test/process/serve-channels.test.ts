import { mkdtemp, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newApiKey } from "../../shared/adapters/local/api-keys.ts";
import { tenantUrn } from "../../shared/domain/urn.ts";
import { arborEnv, killAll, startServe } from "../support/arbor-process.ts";
import { getWithHost } from "../support/http.ts";
import { eventually } from "../support/until.ts";

/**
 * `arbor serve` as a real process: the agent card's URL comes from configuration, never from the
 * request; and the keys file it watches decides, while it runs, who gets in (an emptied or deleted
 * file lets nobody in, an invalid one fails closed).
 */
const ada = newApiKey({ id: "user_ada", kind: "human", tenant: "acme", roles: [] });
const bea = newApiKey({ id: "user_bea", kind: "human", tenant: "beta", roles: [] });
const fileOf = (...entries: (typeof ada.entry)[]) => `${JSON.stringify({ keys: entries }, null, 2)}\n`;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "arbor-serve-channels-"));
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

async function serve(name: string, args: string[] = [], env: Record<string, string> = {}) {
  const keysFile = join(dir, `${name}-keys.json`);
  await writeFile(keysFile, fileOf(ada.entry, bea.entry), { mode: 0o600 });
  const server = await startServe(
    arborEnv(join(dir, name), { ARBOR_API_KEYS_FILE: keysFile, POWERTOOLS_LOG_LEVEL: "INFO", ...env }),
    ["--example", "offsite", ...args],
  );
  return { server, keysFile };
}

const cardUrl = async (url: string, host: string) => {
  const res = await getWithHost(`${url}/.well-known/agent-card.json`, host);
  expect(res.status).toBe(200);
  expect(res.body).not.toContain("evil");
  return (JSON.parse(res.body) as { supportedInterfaces: { url: string }[] }).supportedInterfaces[0]?.url;
};

describe("the agent card of arbor serve", () => {
  it("names --public-url (over ARBOR_PUBLIC_URL), else ARBOR_PUBLIC_URL, else where it listens: never the Host header", async () => {
    const [flag, setting, plain] = await Promise.all([
      serve("card-flag", ["--public-url", "https://arbor.example.com/"], {
        ARBOR_PUBLIC_URL: "https://ignored.example.com",
      }),
      serve("card-env", [], { ARBOR_PUBLIC_URL: "https://agents.example.org/arbor" }),
      serve("card-plain"),
    ]);
    for (const host of ["evil.example", "evil.example:443", "127.0.0.1.evil.example"]) {
      expect(await cardUrl(flag.server.url, host)).toBe("https://arbor.example.com/a2a");
      expect(await cardUrl(setting.server.url, host)).toBe("https://agents.example.org/arbor/a2a");
      expect(await cardUrl(plain.server.url, host)).toBe(`${plain.server.url}/a2a`);
    }
  }, 120_000);

  it("refuses to start with a public URL that is not an absolute http(s) URL", async () => {
    await expect(serve("card-bad", ["--public-url", "https://x.example.com/?next=evil"])).rejects.toThrow(
      /has a query/,
    );
  }, 60_000);
});

describe("the keys file, changed while arbor serve runs", () => {
  it("emptied or deleted: no key works; invalid: every request is 503 saying why, until it is valid again", async () => {
    const { server, keysFile } = await serve("keys");
    const { url } = server;
    const own = (key: string, tenant: string) =>
      fetch(`${url}/v1/tasks/${encodeURIComponent(`${tenantUrn(tenant)}/common.Conversation.none`)}`, {
        headers: { authorization: `Bearer ${key}` },
      });
    const a2a = (key: string) =>
      fetch(`${url}/a2a`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ListTasks", params: {} }),
      });
    const statuses = async () => ({
      ada: (await own(ada.key, "acme")).status,
      bea: (await own(bea.key, "beta")).status,
      adaA2a: (await a2a(ada.key)).status,
    });
    const becomes = async (want: { ada: number; bea: number; adaA2a: number }) =>
      expect(await eventually(statuses, (s) => JSON.stringify(s) === JSON.stringify(want))).toEqual(want);

    // Both keys work: a task of one's own tenant in a conversation nobody started is the policy's 403, and A2A lists.
    await becomes({ ada: 403, bea: 403, adaA2a: 200 });

    await writeFile(keysFile, ""); // emptied
    await becomes({ ada: 401, bea: 401, adaA2a: 401 });

    await writeFile(keysFile, fileOf(ada.entry, bea.entry));
    await becomes({ ada: 403, bea: 403, adaA2a: 200 });

    await writeFile(keysFile, '{"keys": [');
    await becomes({ ada: 503, bea: 503, adaA2a: 503 });
    const refused = await own(ada.key, "acme");
    expect(await refused.json()).toEqual({
      error: {
        code: "UNAVAILABLE",
        message: expect.stringMatching(
          /^Arbor's API keys file is not valid \(it is not JSON: .+\), so no key/,
        ),
      },
    });
    expect(refused.status).toBe(503);
    const refusedA2a = (await (await a2a(ada.key)).json()) as { error: { message: string } };
    expect(refusedA2a.error.message).toMatch(/API keys file is not valid/);
    // A request without a key is refused the same way: nobody is let in.
    expect((await fetch(`${url}/v1/messages`, { method: "POST", body: "{}" })).status).toBe(503);
    expect(server.output()).toMatch(/The API keys file is not valid: every request is refused/);

    // Valid JSON, but not a keys file: still closed, and the answer names the bad field.
    await writeFile(keysFile, JSON.stringify({ keys: [{ ...bea.entry, sha256: "nope" }] }));
    const field = await eventually(
      async () => (await (await own(bea.key, "beta")).json()) as { error: { message: string } },
      (b) => /keys\.0\.sha256/.test(b.error.message),
    );
    expect(field.error.message).toMatch(/keys\.0\.sha256/);

    // Valid again, with bea only: bea is back in, ada's key is revoked.
    await writeFile(keysFile, fileOf(bea.entry));
    await becomes({ ada: 401, bea: 403, adaA2a: 401 });

    await unlink(keysFile); // deleted
    await becomes({ ada: 401, bea: 401, adaA2a: 401 });
    expect(server.output()).toMatch(/The API keys file is gone: no key is accepted/);
  }, 120_000);
});
