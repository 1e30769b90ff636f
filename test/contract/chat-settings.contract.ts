import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/kernel/errors.ts";
import type { ChatSettingsSource } from "../../shared/notify/chat/types.ts";

/**
 * The one contract every ChatSettingsSource loader passes (shared/notify/chat/settings.ts): the local
 * file of `arbor serve` and the Secrets Manager secret of a deployed stack. `setup` returns an
 * empty store: `write(text)` puts a value there (the file written, a new version of the secret),
 * `source` makes a loader over it with the given TTL and clock.
 */
export interface ChatSettingsFixture {
  source(options: { ttlMs: number; now: () => number }): ChatSettingsSource;
  write(text: string): Promise<void>;
  cleanup(): Promise<void>;
}

/** Values that look like secrets, so a message that carries one is seen. */
export const SIGNING_SECRET = "s1gning-secret-8f3a9c";
export const BOT_TOKEN = "xoxb-bot-token-77aa11";
export const APP_PASSWORD = "teams-app-password-5e5e";

export const settingsJson = (over: { botToken?: string; tenant?: string } = {}) =>
  JSON.stringify({
    slack: {
      signingSecret: SIGNING_SECRET,
      workspaces: {
        T0001: { tenant: over.tenant ?? "acme", botToken: over.botToken ?? BOT_TOKEN },
      },
    },
    teams: {
      appId: "00000000-0000-0000-0000-000000000001",
      appPassword: APP_PASSWORD,
      tenants: { "aad-tenant-1": { tenant: "acme", admins: ["user_alice"] } },
    },
  });

const secrets = [SIGNING_SECRET, BOT_TOKEN, APP_PASSWORD];

export function chatSettingsContract(name: string, setup: () => Promise<ChatSettingsFixture>): void {
  describe(`ChatSettingsSource contract: ${name}`, () => {
    let fx: ChatSettingsFixture;
    let clock = 1_000_000;
    const now = () => clock;
    beforeEach(async () => {
      clock = 1_000_000;
      fx = await setup();
    });
    afterEach(async () => {
      await fx.cleanup();
    });

    it("gives the settings parsed, with the schema's defaults", async () => {
      await fx.write(settingsJson());
      const settings = await fx.source({ ttlMs: 60_000, now })();
      expect(settings?.slack?.signingSecret).toBe(SIGNING_SECRET);
      expect(settings?.slack?.apiUrl).toBe("https://slack.com/api/");
      expect(settings?.slack?.workspaces.T0001).toEqual({
        tenant: "acme",
        botToken: BOT_TOKEN,
        users: {},
        admins: [],
        defaultRoles: [],
      });
      expect(settings?.teams?.issuers).toEqual(["https://api.botframework.com"]);
      expect(settings?.teams?.tenants["aad-tenant-1"]?.admins).toEqual(["user_alice"]);
    });

    it("answers calls at once with one read, and the same settings each time", async () => {
      await fx.write(settingsJson());
      const source = fx.source({ ttlMs: 60_000, now });
      const [a, b, c] = await Promise.all([source(), source(), source()]);
      expect(a).toBeDefined();
      expect(b).toEqual(a);
      expect(c).toEqual(a);
      expect(await source()).toEqual(a);
    });

    it("takes a rotated value after the TTL at the latest", async () => {
      await fx.write(settingsJson());
      const source = fx.source({ ttlMs: 60_000, now });
      expect((await source())?.slack?.workspaces.T0001?.botToken).toBe(BOT_TOKEN);
      await fx.write(settingsJson({ botToken: "xoxb-rotated-token-2" }));
      clock += 60_001;
      expect((await source())?.slack?.workspaces.T0001?.botToken).toBe("xoxb-rotated-token-2");
    });

    it("refuses a value that is not JSON, without quoting it", async () => {
      await fx.write(`{"slack": {"signingSecret": "${SIGNING_SECRET}"`);
      const error = await fx
        .source({ ttlMs: 60_000, now })()
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/is not JSON/);
      for (const s of secrets) expect((error as Error).message).not.toContain(s);
    });

    it("names each bad field, never a value", async () => {
      const bad = JSON.parse(settingsJson()) as {
        slack: { workspaces: Record<string, Record<string, unknown>> };
        teams: Record<string, unknown>;
      };
      (bad.slack.workspaces.T0001 as Record<string, unknown>).botToken = "short";
      (bad.slack.workspaces.T0001 as Record<string, unknown>).tenant = `bad tenant ${SIGNING_SECRET}`;
      bad.teams.appPassword = 42;
      bad.teams.extra = APP_PASSWORD;
      await fx.write(JSON.stringify(bad));
      const error = await fx
        .source({ ttlMs: 60_000, now })()
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      expect(message).toContain("slack.workspaces.T0001.botToken");
      expect(message).toContain("slack.workspaces.T0001.tenant");
      expect(message).toContain("teams.appPassword");
      expect(message).toMatch(/extra/);
      for (const s of [...secrets, "short", "bad tenant"]) expect(message).not.toContain(s);
    });

    it("keeps nothing from a bad value: fixed, it is taken on the next read", async () => {
      await fx.write("{}{");
      const source = fx.source({ ttlMs: 60_000, now });
      await expect(source()).rejects.toBeInstanceOf(ConfigError);
      await fx.write(settingsJson());
      clock += 1; // well within the TTL: a failure is not kept
      expect((await source())?.slack?.signingSecret).toBe(SIGNING_SECRET);
    });

    it("fails closed when a good value is replaced by a bad one", async () => {
      await fx.write(settingsJson());
      const source = fx.source({ ttlMs: 60_000, now });
      expect(await source()).toBeDefined();
      await fx.write(JSON.stringify({ slack: { signingSecret: SIGNING_SECRET } }));
      clock += 60_001;
      await expect(source()).rejects.toThrow(/slack\.workspaces/);
    });
  });
}
