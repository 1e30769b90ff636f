import type { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, UnavailableError } from "../../shared/kernel/errors.ts";
import { secretChatSettings } from "../../shared/notify/chat/settings.ts";
import { secretsManagerSecret } from "../../shared/runtime/aws/aws-chat.ts";
import { SecretsManagerPeer } from "../peers/secrets-manager-peer.ts";
import { BOT_TOKEN, chatSettingsContract, settingsJson } from "./chat-settings.contract.ts";

// The real Secrets Manager client against the Secrets Manager peer (test/peers/secrets-manager-peer.ts).
let peer: SecretsManagerPeer;
let client: SecretsManagerClient;
let n = 0;
beforeAll(async () => {
  peer = await SecretsManagerPeer.start("eu-west-1");
  client = peer.client();
});
afterAll(async () => {
  client.destroy();
  await peer.close();
});

chatSettingsContract("a Secrets Manager secret (peer, real client)", async () => {
  const name = `arbor/chat-contract-${++n}`;
  let arn: string | undefined;
  return {
    source: (options) => {
      if (!arn) throw new Error("write a value first");
      return secretChatSettings({ getSecret: secretsManagerSecret(client), secretId: arn, ...options });
    },
    write: async (text) => {
      if (arn) peer.put(arn, text);
      else arn = peer.create(name, text);
    },
    cleanup: async () => {},
  };
});

describe("the chat secret", () => {
  let clock = 0;
  const now = () => clock;

  it("reads it once per TTL, whatever the calls (five minutes by default)", async () => {
    const arn = peer.create(`arbor/chat-ttl-${++n}`, settingsJson());
    const source = secretChatSettings({ getSecret: secretsManagerSecret(client), secretId: arn, now });
    const reads = () =>
      peer.calls.filter((c) => c.secretId === arn && c.operation === "GetSecretValue").length;
    await Promise.all([source(), source(), source()]);
    for (let i = 0; i < 5; i++) await source();
    expect(reads()).toBe(1);
    clock += 5 * 60_000 - 1;
    await source();
    expect(reads()).toBe(1);
    peer.put(arn, settingsJson({ botToken: "xoxb-rotated-token-3" }));
    clock += 2;
    expect((await source())?.slack?.workspaces.T0001?.botToken).toBe("xoxb-rotated-token-3");
    expect(reads()).toBe(2);
  });

  it("takes its name or its ARN without the six characters, as Secrets Manager does", async () => {
    const name = `arbor/chat-name-${++n}`;
    const arn = peer.create(name, settingsJson());
    for (const id of [name, arn.slice(0, -7)])
      expect(
        (await secretChatSettings({ getSecret: secretsManagerSecret(client), secretId: id })())?.slack
          ?.workspaces.T0001?.botToken,
      ).toBe(BOT_TOKEN);
  });

  it("says what to do when it is missing, not granted, or binary", async () => {
    const missing = await secretChatSettings({
      getSecret: secretsManagerSecret(client),
      secretId: "arbor/no-such-secret",
    })().catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ConfigError);
    expect((missing as Error).message).toMatch(/arbor\/no-such-secret .*does not exist.*create-secret/);

    const arn = peer.create(`arbor/chat-denied-${++n}`, settingsJson());
    peer.deny(arn);
    const denied = await secretChatSettings({
      getSecret: secretsManagerSecret(client),
      secretId: arn,
    })().catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(ConfigError);
    expect((denied as Error).message).toMatch(/cannot be read by this function: deploy with -c chatSecret/);
    expect((denied as Error).message).not.toContain(BOT_TOKEN);
  });

  it("a service that does not answer is worth retrying (UnavailableError), and nothing is kept", async () => {
    const arn = peer.create(`arbor/chat-down-${++n}`, settingsJson());
    const gone = await SecretsManagerPeer.start("eu-west-1");
    const endpoint = gone.endpoint;
    await gone.close();
    const { SecretsManagerClient: Client } = await import("@aws-sdk/client-secrets-manager");
    const down = new Client({
      endpoint,
      region: "eu-west-1",
      credentials: { accessKeyId: "a", secretAccessKey: "b" },
      maxAttempts: 1,
    });
    try {
      await expect(
        secretChatSettings({ getSecret: secretsManagerSecret(down), secretId: arn })(),
      ).rejects.toBeInstanceOf(UnavailableError);
    } finally {
      down.destroy();
    }
  });
});
