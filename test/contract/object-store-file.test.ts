import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileObjectStore } from "../../shared/adapters/local/file-object-store.ts";
import { artifactStoreContract } from "./artifact-store.contract.ts";
import { objectStoreContract } from "./object-store.contract.ts";

/** A fresh folder of files. */
async function fileStore() {
  const root = await mkdtemp(join(tmpdir(), "arbor-objects-"));
  return { store: new FileObjectStore({ root }), cleanup: () => rm(root, { recursive: true, force: true }) };
}

objectStoreContract("files on disk", fileStore);
artifactStoreContract("files on disk", fileStore);

objectStoreContract("files on disk, with the in-memory cache", async () => {
  const root = await mkdtemp(join(tmpdir(), "arbor-objects-"));
  return {
    store: new FileObjectStore({ root, cache: true }),
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
});
