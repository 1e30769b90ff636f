import { join } from "node:path";
import { DEFAULT_KEY_CACHE_TTL_MS } from "../../shared/channels/http/key-cache.ts";
import { formatIssues } from "../../shared/domain/resources.ts";
import { UnavailableError, ValidationError } from "../../shared/kernel/errors.ts";
import {
  type ApiKeyEntry,
  ApiKeySchema,
  fingerprintOf,
  type KeyStore,
  newApiKey,
  newKeyProblem,
} from "../../shared/ports/key-store.ts";
import {
  type KeysTarget,
  type LocalConfig,
  loadConfig,
  loadKeysTarget,
} from "../../shared/runtime/config.ts";
import { tableKeyStore } from "../../shared/runtime/key-stores.ts";
import { fileKeyStore } from "../../shared/runtime/local/key-file.ts";
import { UsageError } from "../command.ts";
import { type KeyView, RemoteKeys } from "./keys-remote.ts";
import { heading, note } from "./render.ts";

/**
 * `arbor keys add|list|revoke`: the API keys callers use. A key is printed once; wherever keys
 * are kept, only their sha256 is. Three places, chosen by the environment (loadKeysTarget):
 *   - the local keys file of `arbor serve` (ARBOR_API_KEYS_FILE, default <dataDir>/api-keys.json,
 *     0600): a running serve takes a change within a second;
 *   - a remote Arbor (ARBOR_URL + ARBOR_KEY, an admin key of your tenant) through its admin routes:
 *     a deployed stack or another machine's `arbor serve`;
 *   - the state table of a deployed stack, directly with your AWS credentials (ARBOR_MODE=aws,
 *     ARBOR_TABLE_NAME, AWS_REGION): how the first admin key of a fresh stack is made.
 */
export interface AddKeyOptions {
  id: string | undefined;
  kind: string | undefined;
  /** Default: ARBOR_TENANT locally and on the table; the admin key's own tenant remotely. */
  tenant: string | undefined;
  roles: readonly string[];
  /** How the principal is named where people read it. */
  name?: string | undefined;
}

export const keysFileOf = (config: LocalConfig): string =>
  config.apiKeysFile ?? join(config.dataDir, "api-keys.json");

/** Where the keys are, as the commands use it: a key store (file, table) or a remote Arbor. */
interface Keys {
  /** Named in the output ("to <where>", "in <where>"). */
  where: string;
  /** When a change counts, said after it. */
  takesEffect: string;
  /** The tenant a command means when it names none (undefined: every tenant, for list and revoke). */
  defaultTenant: string | undefined;
  add(options: {
    id: string;
    kind: "human" | "agent";
    tenant: string | undefined;
    roles: string[];
    name: string | undefined;
  }): Promise<{
    key: string;
    view: KeyView;
  }>;
  list(tenant: string | undefined): Promise<KeyView[]>;
  revoke(which: string, tenant: string | undefined): Promise<KeyView[]>;
  close(): void;
}

export async function keysCommand(
  sub: string | undefined,
  which: string | undefined,
  options: AddKeyOptions,
  write: (line: string) => void,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<void> {
  if (sub !== "add" && sub !== "list" && sub !== "revoke") throw new UsageError();
  const keys = keysAt(loadKeysTarget(env), env);
  try {
    if (sub === "add") return await addKey(keys, options, write);
    if (sub === "list") return await listKeys(keys, options.tenant, write);
    return await revokeKey(keys, which, options.tenant, write);
  } finally {
    keys.close();
  }
}

async function addKey(keys: Keys, options: AddKeyOptions, write: (line: string) => void): Promise<void> {
  const { id } = options;
  if (!id) throw new UsageError(`Say whose key it is with --id.`);
  const kind = options.kind ?? (id.startsWith("agent_") ? "agent" : "human");
  if (kind !== "human" && kind !== "agent") throw new UsageError(`--kind is human or agent, not "${kind}".`);
  const problem = newKeyProblem({ kind, roles: [...options.roles] });
  if (problem) throw new ValidationError(problem);
  const { key, view } = await keys.add({
    id,
    kind,
    tenant: options.tenant ?? keys.defaultTenant,
    roles: [...options.roles],
    name: options.name,
  });
  write(
    `${heading("Added")} a key for ${view.name ? `${view.name} (${id})` : id} (${kind}, tenant ${view.tenant}${view.roles.length ? `, roles ${view.roles.join(", ")}` : ""}) to ${keys.where}`,
  );
  write("The key (shown this once; only its sha256 is kept):\n");
  write(`  ${key}\n`);
  write(note(`Use it as \`Authorization: Bearer ${key}\`; ${keys.takesEffect}.`));
}

/** `arbor keys list`: who each key stands for, never the key (no store has it). */
async function listKeys(keys: Keys, tenant: string | undefined, write: (line: string) => void) {
  const listed = await keys.list(tenant);
  if (listed.length === 0) {
    write(note(`No keys in ${keys.where}. Add one: npx arbor keys add --id user_<your-name>`));
    return;
  }
  write(`${heading("Keys")} in ${keys.where}`);
  for (const k of listed)
    write(
      `  ${k.fingerprint}  ${k.id.padEnd(24)} ${k.kind.padEnd(6)} tenant ${k.tenant}${k.roles.length ? `, roles ${k.roles.join(", ")}` : ""}${k.name ? `, named ${k.name}` : ""}`,
    );
}

/**
 * `arbor keys revoke <id>|<fingerprint>`: removes every key of that principal, or the one key with
 * that fingerprint (at least 8 hex digits of its sha256, as `keys list` shows them).
 */
async function revokeKey(
  keys: Keys,
  which: string | undefined,
  tenant: string | undefined,
  write: (line: string) => void,
) {
  if (!which) throw new UsageError(`Say which key to revoke.`);
  const gone = await keys.revoke(which, tenant);
  for (const k of gone) write(`${heading("Revoked")} ${k.fingerprint} ${k.id} (tenant ${k.tenant})`);
  write(note(`${keys.takesEffect.charAt(0).toUpperCase()}${keys.takesEffect.slice(1)}.`));
}

function keysAt(target: KeysTarget, env: Readonly<Record<string, string | undefined>>): Keys {
  if (target.kind === "remote") {
    const remote = new RemoteKeys({ url: target.url, key: target.key });
    return {
      where: target.url,
      takesEffect: `the API at ${target.url} sees the change now (every instance of a deployed stack within ${DEFAULT_KEY_CACHE_TTL_MS / 1000} s)`,
      defaultTenant: undefined, // the admin key's own tenant
      add: (o) => remote.add(o),
      list: async (tenant) => {
        await remote.checkTenant(tenant);
        return remote.list();
      },
      revoke: async (which, tenant) => {
        await remote.checkTenant(tenant);
        return remote.revoke(which);
      },
      close: () => {},
    };
  }
  if (target.kind === "table") {
    const table = tableKeyStore(target);
    const where = `the state table ${target.tableName} (${target.region})`;
    const store = fromStore(table.store, loadTenant(env));
    const explained =
      <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
      (...args: A) =>
        fn(...args).catch((error: unknown) => {
          if (!(error instanceof UnavailableError)) throw error;
          const cause = (error.cause ?? error) as Error;
          throw new UnavailableError(
            `Cannot use ${where} (${cause.name}: ${cause.message}): check ARBOR_TABLE_NAME (the storage ` +
              "stack's output StateTableName), AWS_REGION (the stack's) and your AWS credentials (those you deploy with, AWS_PROFILE)",
            { cause: error },
          );
        });
    return {
      defaultTenant: store.defaultTenant,
      add: explained(store.add),
      list: explained(store.list),
      revoke: explained(store.revoke),
      where: `the state table ${target.tableName}`,
      takesEffect: `the deployed API sees the change within ${DEFAULT_KEY_CACHE_TTL_MS / 1000} s`,
      close: table.close,
    };
  }
  const config = loadConfig(env);
  if (config.mode !== "local") throw new ValidationError("arbor keys: unexpected configuration");
  const file = keysFileOf(config);
  return {
    ...fromStore(fileKeyStore(file), config.tenant),
    where: file,
    takesEffect: "a running `arbor serve` sees the change within a second",
    close: () => {},
  };
}

/** The commands on a key store: the key is made here and only its hash is stored. */
function fromStore(store: KeyStore, tenant: string): Pick<Keys, "add" | "list" | "revoke" | "defaultTenant"> {
  return {
    defaultTenant: tenant,
    async add({ id, kind, tenant: t, roles, name }) {
      const { key, entry } = newApiKey({
        id,
        kind,
        tenant: t ?? tenant,
        roles,
        ...(name === undefined ? {} : { name }),
      });
      const checked = ApiKeySchema.safeParse(entry);
      if (!checked.success)
        throw new UsageError(
          `That key cannot be added (${formatIssues(checked.error)
            .map((issue) => issue.replace(/^/, "--"))
            .join("; ")}).`,
        );
      await store.add(checked.data);
      return { key, view: viewOf(checked.data) };
    },
    list: async (t) => (await store.list(t)).map(viewOf),
    revoke: async (which, t) => (await store.revoke(which, t)).map(viewOf),
  };
}

const viewOf = (k: ApiKeyEntry): KeyView => ({
  fingerprint: fingerprintOf(k),
  id: k.id,
  kind: k.kind,
  tenant: k.tenant,
  roles: k.roles,
  ...(k.name ? { name: k.name } : {}),
});

/** ARBOR_TENANT (default local), read as loadConfig reads it, without the rest of aws mode's settings. */
function loadTenant(env: Readonly<Record<string, string | undefined>>): string {
  const config = loadConfig({ ARBOR_TENANT: env.ARBOR_TENANT });
  return config.tenant;
}
