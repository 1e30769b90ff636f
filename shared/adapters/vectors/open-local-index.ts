import { access, rename } from "node:fs/promises";
import { join } from "node:path";
import type { EmbeddingSpace, VectorRecord } from "../../ports/vector-index.ts";
import { LocalVectorIndex } from "./local-vector-index.ts";
import { SqliteVectorIndex, type SqliteVectorIndexOptions } from "./sqlite-vector-index.ts";

/**
 * The local mode's vector index for one embedding space: `<folder>/<name>.db` (SqliteVectorIndex).
 * A data folder written by an earlier version holds the flat index in `<folder>/<name>/` instead:
 * the first open copies its records into the new file (in the transaction that creates it, so a
 * crash half-way copies again next time), then renames the old folder to `<name>.migrated`, which
 * can be deleted once the new index is trusted.
 */
export async function openLocalVectorIndex(
  folder: string,
  name: string,
  space: EmbeddingSpace,
  options: SqliteVectorIndexOptions = {},
): Promise<SqliteVectorIndex> {
  const path = join(folder, `${name}.db`);
  const legacy = join(folder, name);
  const hasLegacy = await access(join(legacy, "index.json")).then(
    () => true,
    () => false,
  );
  if (!hasLegacy) return SqliteVectorIndex.open(path, space, options);
  const flat = await LocalVectorIndex.open(legacy, space, { durable: false });
  const records: VectorRecord[] = [...flat.records()];
  const index = SqliteVectorIndex.open(path, space, { ...options, seed: () => records });
  await rename(legacy, `${legacy}.migrated`);
  return index;
}
