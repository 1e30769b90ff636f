import { type Script, ScriptedLlm, type ScriptedLlmOptions } from "../../adapters/llm/scripted-llm.ts";
import { ApiKeys, readApiKeysFile, watchApiKeysFile } from "../../adapters/local/api-keys.ts";
import { FileKeyStore } from "../../adapters/local/file-key-store.ts";
import type { ArborLogger } from "../../kernel/logger.ts";
import type { KeyStore } from "../../ports/key-store.ts";
import type { Llm } from "../../ports/llm.ts";
import type { PolicyEngine } from "../../ports/policy.ts";

/**
 * What the CLI's local commands take from the local composition root besides the runtime itself
 * (local.ts): a scripted model for the examples, the policy of a folder, the data folder's keys
 * file. Chosen here, so that no command picks an adapter itself.
 */

/** A model that answers from a script (the offline examples); without a script, one for an engine that calls none. */
export const scriptedModel = (script: Script = [], options?: ScriptedLlmOptions): Llm =>
  new ScriptedLlm(script, options);

/** The OPA policy of a folder (ARBOR_POLICY_DIR: a wasm bundle built with `opa build -t wasm`). */
export const folderPolicy = async (dir: string): Promise<PolicyEngine> =>
  // Loaded only when a folder's policy is asked for: the commands that need none start without it.
  (await import("../../adapters/policy/opa-policy-engine.ts")).OpaPolicyEngine.fromFolder(dir);

/** The data folder's keys file, as `arbor serve` holds it. */
export interface ServedKeys {
  /** Who may call; the admin routes write the file through it, and the server takes it at once. */
  store: KeyStore;
  /** Stops watching the file. */
  stop: () => void;
}

/** The keys file now: how many keys (none: `arbor serve` says how to make one and stops), of which tenants. */
export function keysFileNow(file: string): { keys: number; tenants: string[] } {
  const keys = readApiKeysFile(file)?.keys ?? [];
  return { keys: keys.length, tenants: [...new Set(keys.map((k) => k.tenant))] };
}

/**
 * The keys file, read now and watched: a key added (`arbor keys add`) or removed while serving counts
 * from the next request on; an emptied or deleted file lets nobody in, an invalid one fails closed.
 */
export function servedKeys(file: string, log: Pick<ArborLogger, "info" | "warn" | "error">): ServedKeys {
  const keys = new ApiKeys(readApiKeysFile(file) ?? { keys: [] });
  const stop = watchApiKeysFile(file, keys, { log });
  return { store: new FileKeyStore(file, keys), stop };
}
