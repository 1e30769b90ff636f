import { GetSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { secretChatSettings } from "../../notify/chat/settings.ts";
import type { ChatSettingsSource } from "../../notify/chat/types.ts";
import type { AwsConfig } from "../config.ts";

/**
 * The chat channels' settings on the AWS runtime: the Secrets Manager secret of
 * ARBOR_CHAT_SECRET_ARN (the engine stack sets it on the API and notify functions from
 * `-c chatSecret`), read with GetSecretValue and kept for ARBOR_CHAT_SETTINGS_TTL_MS (five minutes:
 * a rotated secret is taken within that). How to drive it:
 *
 *   const chat = awsChatSettings(config);          // undefined: no chat channels on this stack
 *   chatRoutes({ ..., settings: chat.settings }); chatSurfaces(chat.settings, { fetch, state });
 *   chat.close();
 *
 * The client is the region's, or ARBOR_SECRETSMANAGER_ENDPOINT's (a local peer in tests).
 */
export interface AwsChat {
  settings: ChatSettingsSource;
  close(): void;
}

export interface AwsChatOptions {
  /** A client already made (tests: the Secrets Manager peer's); not closed here. */
  client?: SecretsManagerClient;
  now?: () => number;
}

export function awsChatSettings(config: AwsConfig, options: AwsChatOptions = {}): AwsChat | undefined {
  if (!config.chat) return undefined;
  const owned = options.client
    ? undefined
    : new SecretsManagerClient({
        region: config.region,
        ...(config.endpoints.secretsmanager ? { endpoint: config.endpoints.secretsmanager } : {}),
      });
  const client = options.client ?? (owned as SecretsManagerClient);
  return {
    settings: secretChatSettings({
      getSecret: secretsManagerSecret(client),
      secretId: config.chat.secretId,
      ttlMs: config.chat.ttlMs,
      ...(options.now ? { now: options.now } : {}),
    }),
    close: () => owned?.destroy(),
  };
}

/** A secret's current value (AWSCURRENT), read with Secrets Manager's GetSecretValue. */
export const secretsManagerSecret =
  (client: Pick<SecretsManagerClient, "send">) =>
  (secretId: string): Promise<{ SecretString?: string | undefined; SecretBinary?: Uint8Array | undefined }> =>
    client.send(new GetSecretValueCommand({ SecretId: secretId }));
