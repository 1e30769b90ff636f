import { FileKeyStore } from "../../adapters/local/file-key-store.ts";
import type { KeyStore } from "../../ports/key-store.ts";

/** A data folder's keys file (`arbor serve` watches it), as `arbor keys` opens it. */
export const fileKeyStore = (file: string): KeyStore => new FileKeyStore(file);
