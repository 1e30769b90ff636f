import { chmod, mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { ApiKeysSchema, newApiKey, readApiKeysFile } from "../channels/api-keys.ts";
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
  const keys = { keys: [...(readApiKeysFile(file)?.keys ?? []), entry] };
  await mkdir(dirname(file), { recursive: true });
  // Written whole and renamed into place, readable by its owner only.
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(keys, null, 2)}\n`, { mode: 0o600 });
  await chmod(temporary, 0o600);
  await rename(temporary, file);
  write(
    `${heading("Added")} a key for ${id} (${kind}, tenant ${options.tenant}${entry.roles.length ? `, roles ${entry.roles.join(", ")}` : ""}) to ${file}`,
  );
  write("The key (shown this once; only its sha256 is kept):\n");
  write(`  ${key}\n`);
  write(
    note(`Use it as \`Authorization: Bearer ${key}\`; a running \`arbor serve\` takes it within a second.`),
  );
}
