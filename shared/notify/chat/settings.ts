import { constants } from "node:fs";
import { open, stat } from "node:fs/promises";
import { ConfigError, UnavailableError } from "../../kernel/errors.ts";
import { type ChatSettings, ChatSettingsSchema, type ChatSettingsSource } from "./types.ts";

/**
 * Where the chat channels' settings (ChatSettingsSchema: Slack's signing secret and bot tokens,
 * the Teams app's password, who is who) come from. Two loaders, one behaviour (the contract suite
 * test/contract/chat-settings.contract.ts runs both):
 *
 *   const settings = fileChatSettings({ file: "<dataDir>/chat.json" });            // arbor serve
 *   const settings = secretChatSettings({ client, secretId: process.env.ARBOR_CHAT_SECRET_ARN }); // AWS
 *   await settings();   // ChatSettings, or undefined: no chat channel here
 *
 * Each reads once and keeps what it read for `ttlMs` (default five minutes): a rotated secret or
 * an edited file is taken without a restart. The file loader also looks at the file's metadata on
 * every call and reads again as soon as it changed (an edit, a `chmod`, a replacement).
 * Concurrent calls share one read.
 *
 * A value that is not valid rejects with ConfigError naming the fields to fix (a field's path and
 * what is wrong with it, never its value: these are secrets), and nothing is kept: the next call
 * reads again. Nothing here logs; the messages never carry a secret, so the callers may log them.
 */
export const DEFAULT_CHAT_SETTINGS_TTL_MS = 5 * 60_000;
/** A settings file past this is not a settings file. */
export const MAX_CHAT_SETTINGS_BYTES = 1024 * 1024;

export interface ChatSettingsCacheOptions {
  /** How long a read is kept (default DEFAULT_CHAT_SETTINGS_TTL_MS). */
  ttlMs?: number;
  /** Milliseconds (tests move it on). */
  now?: () => number;
}

/**
 * The chat settings, parsed: ConfigError naming each bad field (`slack.workspaces.T01.botToken:
 * Too small ...`), without a value, and without JSON.parse's message (it quotes the text).
 */
export function parseChatSettings(text: string, source: string): ChatSettings {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ConfigError(
      `${source} is not JSON: write one JSON object with "slack" and/or "teams" (see shared/channels/chat/CHAT-DEPLOY.md)`,
    );
  }
  const parsed = ChatSettingsSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const fields = parsed.error.issues.map(
    (i) => `${i.path.length ? i.path.map(String).join(".") : "(the whole value)"}: ${i.message}`,
  );
  throw new ConfigError(
    `${source} is not valid chat settings; fix these fields (shared/notify/chat/types.ts, ChatSettingsSchema, ` +
      `describes each):\n  ${fields.join("\n  ")}`,
  );
}

// ---- the local file ------------------------------------------------------------------------------

export interface FileChatSettingsOptions extends ChatSettingsCacheOptions {
  /** ARBOR_CHAT_SETTINGS_FILE, else <dataDir>/chat.json. */
  file: string;
  /**
   * The file was named (ARBOR_CHAT_SETTINGS_FILE): its absence is an error, not "no chat here".
   * Default false: the data folder's chat.json is optional.
   */
  required?: boolean;
}

interface FileStamp {
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

/**
 * The settings file of `arbor serve`: a JSON file (ChatSettingsSchema) that only its owner may read
 * and write. A file group or others may read or write is refused (ConfigError saying the `chmod`
 * to run), as is anything but a regular file or one past MAX_CHAT_SETTINGS_BYTES. Absent: no chat
 * channel (undefined), unless `required`. Read again when its metadata changes (mtime, ctime: a
 * chmod, size, inode: a replacement) or after the TTL.
 */
export function fileChatSettings(options: FileChatSettingsOptions): ChatSettingsSource {
  const { file } = options;
  const now = options.now ?? Date.now;
  const ttlMs = options.ttlMs ?? DEFAULT_CHAT_SETTINGS_TTL_MS;
  let kept: { stamp: FileStamp | undefined; at: number; value: ChatSettings | undefined } | undefined;
  let reading: Promise<ChatSettings | undefined> | undefined;

  const read = async (): Promise<ChatSettings | undefined> => {
    const at = now();
    const loaded = await readSettingsFile(file, options.required === true);
    kept = { stamp: loaded.stamp, at, value: loaded.value };
    return loaded.value;
  };
  return async () => {
    if (kept && now() - kept.at < ttlMs && sameStamp(kept.stamp, await stampOf(file))) return kept.value;
    reading ??= read().finally(() => {
      reading = undefined;
    });
    return reading;
  };
}

async function stampOf(file: string): Promise<FileStamp | undefined> {
  try {
    const s = await stat(file);
    return { ino: s.ino, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs };
  } catch {
    return undefined; // gone (or unreadable): read again, which says which
  }
}

const sameStamp = (a: FileStamp | undefined, b: FileStamp | undefined): boolean =>
  a === undefined || b === undefined
    ? a === b
    : a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;

/**
 * Opened without blocking (a FIFO in its place would hold the server's thread) and checked on the
 * open descriptor, so what is checked is what is read.
 */
async function readSettingsFile(
  file: string,
  required: boolean,
): Promise<{ stamp: FileStamp | undefined; value: ChatSettings | undefined }> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code === "ENOENT" && !required) return { stamp: undefined, value: undefined };
    throw new ConfigError(
      code === "ENOENT"
        ? `The chat settings file ${file} (ARBOR_CHAT_SETTINGS_FILE) does not exist: create it ` +
            "(see shared/channels/chat/CHAT-DEPLOY.md), or unset ARBOR_CHAT_SETTINGS_FILE for no chat channels"
        : `The chat settings file ${file} cannot be read (${code ?? "error"}): make it readable by the user Arbor runs as`,
    );
  }
  try {
    const s = await handle.stat();
    const stamp = { ino: s.ino, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs };
    if (!s.isFile()) throw new ConfigError(`The chat settings file ${file} is not a regular file`);
    if ((s.mode & 0o077) !== 0)
      throw new ConfigError(
        `The chat settings file ${file} holds secrets and ${whoElse(s.mode)} may ${rw(s.mode)} it ` +
          `(mode ${(s.mode & 0o777).toString(8).padStart(3, "0")}): run  chmod 600 ${shellQuote(file)}  ` +
          "so that only its owner may read and write it; Arbor does not use it until then",
      );
    if (s.size > MAX_CHAT_SETTINGS_BYTES)
      throw new ConfigError(
        `The chat settings file ${file} is larger than ${MAX_CHAT_SETTINGS_BYTES} bytes: it is not a settings file`,
      );
    const text = await handle.readFile("utf8");
    return { stamp, value: parseChatSettings(text, `The chat settings file ${file}`) };
  } finally {
    await handle.close();
  }
}

const whoElse = (mode: number) =>
  (mode & 0o070) !== 0 && (mode & 0o007) !== 0
    ? "its group and others"
    : (mode & 0o070) !== 0
      ? "its group"
      : "others";
const rw = (mode: number) => {
  const bits = ((mode >> 3) | mode) & 0o7;
  const r = (bits & 0o4) !== 0;
  const w = (bits & 0o2) !== 0;
  return r && w ? "read and write" : r ? "read" : w ? "write" : "open";
};
const shellQuote = (s: string) => (/^[A-Za-z0-9._/@:+-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

// ---- the Secrets Manager secret ------------------------------------------------------------------

export interface SecretChatSettingsOptions extends ChatSettingsCacheOptions {
  /**
   * Reads the secret's current value (Secrets Manager's GetSecretValue: runtime/aws/aws-chat.ts;
   * tests point its client at test/peers/secrets-manager-peer.ts). Its errors are Secrets Manager's.
   */
  getSecret: (
    secretId: string,
  ) => Promise<{ SecretString?: string | undefined; SecretBinary?: Uint8Array | undefined }>;
  /** ARBOR_CHAT_SECRET_ARN: the secret's ARN (or name). */
  secretId: string;
}

/**
 * The settings of a deployed stack: a Secrets Manager secret (its SecretString, ChatSettingsSchema
 * JSON), read with GetSecretValue (AWSCURRENT) and kept `ttlMs` (five minutes), so a rotated
 * secret is taken within that. A secret that is missing, not readable (no grant, its key) or not
 * valid rejects with ConfigError saying which; a call the service failed (throttled, unreachable)
 * with UnavailableError. Nothing is kept from a failed read: the next call tries again.
 */
export function secretChatSettings(options: SecretChatSettingsOptions): ChatSettingsSource {
  const now = options.now ?? Date.now;
  const ttlMs = options.ttlMs ?? DEFAULT_CHAT_SETTINGS_TTL_MS;
  const source = `The chat secret ${options.secretId} (ARBOR_CHAT_SECRET_ARN)`;
  let kept: { at: number; value: ChatSettings } | undefined;
  let reading: Promise<ChatSettings> | undefined;

  const read = async (): Promise<ChatSettings> => {
    const at = now();
    let out: { SecretString?: string | undefined; SecretBinary?: Uint8Array | undefined };
    try {
      out = await options.getSecret(options.secretId);
    } catch (cause) {
      throw secretReadError(source, cause);
    }
    if (out.SecretString === undefined)
      throw new ConfigError(
        `${source} has no string value${out.SecretBinary ? " (it is binary)" : ""}: store the settings ` +
          "as JSON text (aws secretsmanager put-secret-value --secret-string file://chat.json)",
      );
    const value = parseChatSettings(out.SecretString, source);
    kept = { at, value };
    return value;
  };
  return async () => {
    if (kept && now() - kept.at < ttlMs) return kept.value;
    reading ??= read().finally(() => {
      reading = undefined;
    });
    return reading;
  };
}

/** Secrets Manager's errors a deployment can fix (ConfigError), or a failure worth retrying. */
function secretReadError(source: string, cause: unknown): Error {
  const name = (cause as { name?: unknown }).name;
  const fixable: Record<string, string> = {
    ResourceNotFoundException:
      "does not exist (or has no current version): create it (aws secretsmanager create-secret, see " +
      "shared/channels/chat/CHAT-DEPLOY.md) or deploy with the right -c chatSecret",
    AccessDeniedException:
      "cannot be read by this function: deploy with -c chatSecret naming it (the stack grants " +
      "secretsmanager:GetSecretValue on it), and -c chatSecretKey when a customer managed key encrypts it",
    DecryptionFailure:
      "cannot be decrypted: its KMS key must let this function decrypt (-c chatSecretKey=<key ARN>)",
    InvalidRequestException: "cannot be read now (it is scheduled for deletion?): restore it",
    InvalidParameterException: "is not a secret's ARN or name",
  };
  if (typeof name === "string" && fixable[name])
    return new ConfigError(`${source} ${fixable[name]}`, { cause: { name } });
  return new UnavailableError(`${source} could not be read from Secrets Manager; try again shortly`, {
    cause,
  });
}
