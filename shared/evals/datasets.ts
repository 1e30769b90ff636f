import { ValidationError } from "../kernel/errors.ts";
import { collectPages, type StateStore } from "../ports/state-store.ts";
import { type EvalCase, parseDataset } from "./dataset.ts";

/**
 * Datasets kept by the tenant (uploaded over the HTTP API, the console, or `arbor eval upload`),
 * so that an experiment can be started by name, on the runtime, by anyone the policy lets. Each is
 * a state record, `eval-dataset#<tenant>#<name>` (parent `eval-datasets#<tenant>`), holding the text
 * as given (JSONL or YAML: dataset.ts), checked before it is kept: a dataset that cannot run is
 * refused at upload, not at the experiment. At most MAX_DATASET_BYTES (a state record's bound).
 *
 *   await putDataset(state, tenant, "offsite", text, { by: actor.id, at });
 *   const { cases } = await datasetCases(state, tenant, "offsite");
 */
export const MAX_DATASET_BYTES = 128 * 1024;
export const DATASET_NAME = /^[A-Za-z0-9._-]{1,100}$/;
const KIND = "eval-dataset";
const key = (tenant: string, name: string) => `${KIND}#${tenant}#${name}`;
const listOf = (tenant: string) => `eval-datasets#${tenant}`;

export interface StoredDataset {
  name: string;
  text: string;
  cases: number;
  bytes: number;
  updatedAt: string;
  updatedBy: string;
}
export type DatasetInfo = Omit<StoredDataset, "text">;

/** The cases of a dataset's text, its size checked first; ValidationError says what is wrong. */
export function checkDataset(text: string, name: string): EvalCase[] {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_DATASET_BYTES)
    throw new ValidationError(
      `The dataset ${name} is ${bytes} bytes, more than ${MAX_DATASET_BYTES}: split it, or run it from a file with arbor eval run on the data folder`,
    );
  return parseDataset(text, name);
}

/** Keeps a dataset under its name (a new version replaces the old). */
export async function putDataset(
  state: StateStore,
  tenant: string,
  name: string,
  text: string,
  by: { by: string; at: string },
): Promise<DatasetInfo> {
  if (!DATASET_NAME.test(name))
    throw new ValidationError("A dataset's name is 1-100 of A-Z a-z 0-9 . _ -", [name.slice(0, 120)]);
  const cases = checkDataset(text, name);
  const data: StoredDataset = {
    name,
    text,
    cases: cases.length,
    bytes: Buffer.byteLength(text),
    updatedAt: by.at,
    updatedBy: by.by,
  };
  const current = await state.get(key(tenant, name));
  await state.transact([
    {
      op: "put",
      record: { key: key(tenant, name), kind: KIND, parent: listOf(tenant), updatedAt: by.at, data },
      expectedVersion: current?.version ?? 0,
    },
  ]);
  const { text: _, ...info } = data;
  return info;
}

export async function getDataset(
  state: StateStore,
  tenant: string,
  name: string,
): Promise<StoredDataset | undefined> {
  if (!DATASET_NAME.test(name)) return undefined;
  return (await state.get<StoredDataset>(key(tenant, name)))?.data;
}

/** The tenant's datasets (without their text), by name. */
export async function listDatasets(state: StateStore, tenant: string): Promise<DatasetInfo[]> {
  const records = await collectPages((cursor) =>
    state.byParent<StoredDataset>(listOf(tenant), { limit: 200, ...(cursor ? { cursor } : {}) }),
  );
  return records.map(({ data: { text: _, ...info } }) => info);
}

/** Deletes a dataset; false when there was none. Experiments that ran it keep their copy of its cases. */
export async function deleteDataset(state: StateStore, tenant: string, name: string): Promise<boolean> {
  const current = DATASET_NAME.test(name) ? await state.get(key(tenant, name)) : undefined;
  if (!current) return false;
  await state.transact([{ op: "delete", key: key(tenant, name), expectedVersion: current.version }]);
  return true;
}
