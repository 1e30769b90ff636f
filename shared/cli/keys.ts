import { chmod, mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { type ApiKeysFile, ApiKeysSchema, newApiKey, readApiKeysFile } from "../channels/api-keys.ts";
import type { LocalConfig } from "../config.ts";
import { formatIssues } from "../domain/resources.ts";
import { ValidationError } from "../errors.ts";
import { heading, note } from "./render.ts";

/**
 * `arbor keys add`: a new API key for `arbor serve`. The key is printed once; the keys file
 * (ARBOR_API_KEYS_FILE, default <dataDir>/api-keys.json, mode 0600) keeps only its sha256.
 */
export interface AddKeyOptions {
  id: string | undefined;
  kind: string | undefined;
  tenant: string;
  roles: readonly string[];
}

export const ADD_KEY_USAGE =
  "Usage: arbor keys add --id user_<name>|agent_<name> [--kind human|agent] [--tenant <tenant>] [--role <role>]...";
export const KEYS_USAGE = `${ADD_KEY_USAGE}
       arbor keys list
       arbor keys revoke <id>|<fingerprint>`;

export const keysFileOf = (config: LocalConfig): string =>
  config.apiKeysFile ?? join(config.dataDir, "api-keys.json");

export async function addKeyCommand(
  config: LocalConfig,
  options: AddKeyOptions,
  write: (line: string) => void,
): Promise<void> {
  const { id } = options;
  if (!id) throw new ValidationError(`Say whose key it is with --id. ${ADD_KEY_USAGE}`);
  const kind = options.kind ?? (id.startsWith("agent_") ? "agent" : "human");
  if (kind !== "human" && kind !== "agent")
    throw new ValidationError(`--kind is human or agent, not "${kind}". ${ADD_KEY_USAGE}`);
  const { key, entry } = newApiKey({ id, kind, tenant: options.tenant, roles: [...options.roles] });
  const checked = ApiKeysSchema.safeParse({ keys: [entry] });
  if (!checked.success)
    throw new ValidationError(
      `That key cannot be added (${formatIssues(checked.error)
        .map((issue) => issue.replace(/^keys\.0\./, "--"))
        .join("; ")}). ${ADD_KEY_USAGE}`,
    );
  const file = keysFileOf(config);
  await writeKeysFile(file, { keys: [...(readApiKeysFile(file)?.keys ?? []), entry] });
  write(
    `${heading("Added")} a key for ${id} (${kind}, tenant ${options.tenant}${entry.roles.length ? `, roles ${entry.roles.join(", ")}` : ""}) to ${file}`,
  );
  write("The key (shown this once; only its sha256 is kept):\n");
  write(`  ${key}\n`);
  write(
    note(`Use it as \`Authorization: Bearer ${key}\`; a running \`arbor serve\` takes it within a second.`),
  );
}

/** The short, stable name of a key in listings: the first 12 hex digits of its sha256. */
export const fingerprintOf = (entry: ApiKeyEntry): string => entry.sha256.slice(0, 12);

/** `arbor keys list`: who each key stands for, never the key (the file does not have it). */
export function listKeysCommand(config: LocalConfig, write: (line: string) => void): void {
  const file = keysFileOf(config);
  const keys = readApiKeysFile(file)?.keys ?? [];
  if (keys.length === 0) {
    write(note(`No keys in ${file}. Add one: npx arbor keys add --id user_<your-name>`));
    return;
  }
  write(`${heading("Keys")} in ${file}`);
  for (const k of keys)
    write(
      `  ${fingerprintOf(k)}  ${k.id.padEnd(24)} ${k.kind.padEnd(6)} tenant ${k.tenant}${k.roles.length ? `, roles ${k.roles.join(", ")}` : ""}`,
    );
}

/**
 * `arbor keys revoke <id>|<fingerprint>`: removes every key of that principal, or the one key with
 * that fingerprint (at least 8 hex digits of its sha256, as `keys list` shows them). A running
 * `arbor serve` stops taking it within a second; the last key revoked leaves nobody in.
 */
export async function revokeKeyCommand(
  config: LocalConfig,
  which: string | undefined,
  write: (line: string) => void,
): Promise<void> {
  if (!which) throw new ValidationError(`Say which key to revoke. ${KEYS_USAGE}`);
  const file = keysFileOf(config);
  const keys = readApiKeysFile(file)?.keys ?? [];
  const byPrint = /^[0-9a-f]{8,64}$/.test(which);
  const gone = keys.filter((k) => k.id === which || (byPrint && k.sha256.startsWith(which)));
  if (gone.length === 0)
    throw new ValidationError(
      `No key in ${file} has the id or fingerprint "${which}": \`arbor keys list\` shows them`,
    );
  if (byPrint && gone.length > 1)
    throw new ValidationError(`${which} names ${gone.length} keys: give more digits of the fingerprint`);
  await writeKeysFile(file, { keys: keys.filter((k) => !gone.includes(k)) });
  for (const k of gone) write(`${heading("Revoked")} ${fingerprintOf(k)} ${k.id} (tenant ${k.tenant})`);
  write(note("A running `arbor serve` stops taking it within a second."));
}

type ApiKeyEntry = ApiKeysFile["keys"][number];

/** Written whole and renamed into place, readable by its owner only. */
async function writeKeysFile(file: string, keys: ApiKeysFile): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
}
