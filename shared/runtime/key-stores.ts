import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoStateStore } from "../adapters/aws/dynamo-state-store.ts";
import { StateKeyStore } from "../adapters/shared/state-key-store.ts";
import type { KeyStore } from "../ports/key-store.ts";
import type { StateStore } from "../ports/state-store.ts";

/**
 * Where API keys are kept on a deployed stack, as the entry points open them (the API function,
 * the CLI's `arbor keys` with ARBOR_MODE=aws): its state table. Chosen here, so that no entry
 * point picks an adapter itself. A data folder's keys file is local/key-file.ts: the functions'
 * bundles never carry it (it locks with libsql, a native module Lambda has no build of).
 */

/** The keys in a state store (the state table of a deployed stack, read by the API function). */
export const stateKeyStore = (state: StateStore): KeyStore => new StateKeyStore(state);

/** The keys in a deployed stack's state table, over a client of its own: `close` lets go of it. */
export function tableKeyStore(target: { region: string; tableName: string; endpoint?: string | undefined }): {
  store: KeyStore;
  close: () => void;
} {
  const client = new DynamoDBClient({
    region: target.region,
    ...(target.endpoint ? { endpoint: target.endpoint } : {}),
  });
  const state = new DynamoStateStore({ client, tableName: target.tableName });
  return { store: stateKeyStore(state), close: () => client.destroy() };
}
