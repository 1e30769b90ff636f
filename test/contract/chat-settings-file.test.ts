import { chmod, mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/kernel/errors.ts";
import { fileChatSettings } from "../../shared/notify/chat/settings.ts";
import { loadConfig } from "../../shared/runtime/config.ts";
import { BOT_TOKEN, chatSettingsContract, settingsJson } from "./chat-settings.contract.ts";

// The settings file of `arbor serve`: written as an operator would (0600), replaced in place.
chatSettingsContract("the local settings file", async () => {
  const dir = await mkdtemp(join(tmpdir(), "arbor-chat-settings-"));
  const file = join(dir, "chat.json");
  return {
    source: (options) => fileChatSettings({ file, ...options }),
    write: async (text) => {
      await writeFile(file, text, { mode: 0o600 });
      await chmod(file, 0o600);
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe("the local settings file", () => {
  let dir: string;
  let file: string;
  let clock = 0;
  const now = () => clock;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "arbor-chat-file-"));
    file = join(dir, "chat.json");
    clock = 0;
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it("absent: no chat channels; named (ARBOR_CHAT_SETTINGS_FILE) and absent: an error saying what to do", async () => {
    expect(await fileChatSettings({ file })()).toBeUndefined();
    await expect(fileChatSettings({ file, required: true })()).rejects.toThrow(
      /does not exist: create it .*or unset ARBOR_CHAT_SETTINGS_FILE/,
    );
  });

  it("refuses a file its group or others may read or write, with the exact chmod to run", async () => {
    for (const mode of [0o640, 0o604, 0o620, 0o644, 0o666]) {
      await writeFile(file, settingsJson());
      await chmod(file, mode);
      const error = await fileChatSettings({ file })().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toContain(`chmod 600 ${file}`);
      expect((error as Error).message).toContain(`mode ${mode.toString(8)}`);
      expect((error as Error).message).not.toContain(BOT_TOKEN);
    }
    await chmod(file, 0o600);
    expect(await fileChatSettings({ file })()).toBeDefined();
    await chmod(file, 0o400);
    expect(await fileChatSettings({ file })()).toBeDefined();
  });

  it("quotes a path with spaces in the chmod it asks for", async () => {
    const odd = join(dir, "my chat.json");
    await writeFile(odd, settingsJson(), { mode: 0o644 });
    await chmod(odd, 0o644);
    await expect(fileChatSettings({ file: odd })()).rejects.toThrow(`chmod 600 '${odd}'`);
  });

  it("reads again as soon as the file changes, before the TTL: an edit, a chmod, a removal", async () => {
    await writeFile(file, settingsJson(), { mode: 0o600 });
    const source = fileChatSettings({ file, ttlMs: 3_600_000, now });
    expect((await source())?.slack?.workspaces.T0001?.tenant).toBe("acme");
    await writeFile(file, settingsJson({ tenant: "globex" }), { mode: 0o600 });
    await utimes(file, new Date(), new Date(Date.now() + 5_000)); // a new mtime, whatever the clock's grain
    expect((await source())?.slack?.workspaces.T0001?.tenant).toBe("globex");
    await chmod(file, 0o644);
    await expect(source()).rejects.toThrow(/chmod 600/);
    await chmod(file, 0o600);
    expect((await source())?.slack?.workspaces.T0001?.tenant).toBe("globex");
    await rm(file);
    expect(await source()).toBeUndefined();
  });

  it("refuses what is not a regular file", async () => {
    await mkdir(file);
    await chmod(file, 0o700);
    await expect(fileChatSettings({ file })()).rejects.toThrow(/not a regular file/);
  });

  it("checks what it reads, not what a link's name says: a link to a shared file is refused", async () => {
    const shared = join(dir, "shared.json");
    await writeFile(shared, settingsJson());
    await chmod(shared, 0o644);
    await symlink(shared, file);
    await expect(fileChatSettings({ file })()).rejects.toThrow(/chmod 600/);
  });
});

describe("the chat settings' configuration", () => {
  it("locally: ARBOR_CHAT_SETTINGS_FILE, else <data folder>/chat.json (optional); no secret ARN", () => {
    expect(loadConfig({ ARBOR_DATA_DIR: "/srv/arbor" })).toMatchObject({
      chat: { file: "/srv/arbor/chat.json", required: false, ttlMs: 300_000 },
    });
    expect(
      loadConfig({ ARBOR_CHAT_SETTINGS_FILE: "/etc/arbor/chat.json", ARBOR_CHAT_SETTINGS_TTL_MS: "60000" }),
    ).toMatchObject({ chat: { file: "/etc/arbor/chat.json", required: true, ttlMs: 60_000 } });
    expect(() => loadConfig({ ARBOR_CHAT_SECRET_ARN: "arbor/chat" })).toThrow(
      /ARBOR_CHAT_SECRET_ARN is read on AWS only.*ARBOR_CHAT_SETTINGS_FILE/,
    );
    expect(() => loadConfig({ ARBOR_CHAT_SETTINGS_TTL_MS: "10" })).toThrow(/ARBOR_CHAT_SETTINGS_TTL_MS/);
  });

  const aws = {
    ARBOR_MODE: "aws",
    AWS_REGION: "eu-west-1",
    ARBOR_RESOURCES_BUCKET: "b",
    ARBOR_TABLE_NAME: "t",
    ARBOR_EVENT_BUS_NAME: "arbor-prod",
    ARBOR_POLICY_ENGINE: "cedar",
  };

  it("on AWS: the secret's ARN or name (none: no chat channels) and its endpoint; no settings file", () => {
    expect(loadConfig(aws)).not.toHaveProperty("chat");
    const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:arbor/chat-AbC123";
    expect(
      loadConfig({
        ...aws,
        ARBOR_CHAT_SECRET_ARN: arn,
        ARBOR_SECRETSMANAGER_ENDPOINT: "http://127.0.0.1:4566",
      }),
    ).toMatchObject({
      chat: { secretId: arn, ttlMs: 300_000 },
      endpoints: { secretsmanager: "http://127.0.0.1:4566" },
    });
    expect(loadConfig({ ...aws, ARBOR_CHAT_SECRET_ARN: "arbor/chat" })).toMatchObject({
      chat: { secretId: "arbor/chat" },
    });
    for (const bad of ["two words", "arn:aws:s3:::bucket/key", "x".repeat(513)])
      expect(() => loadConfig({ ...aws, ARBOR_CHAT_SECRET_ARN: bad })).toThrow(/ARBOR_CHAT_SECRET_ARN/);
    expect(() => loadConfig({ ...aws, ARBOR_CHAT_SETTINGS_FILE: "/tmp/chat.json" })).toThrow(
      /ARBOR_CHAT_SETTINGS_FILE is for `arbor serve`.*ARBOR_CHAT_SECRET_ARN/,
    );
  });
});
