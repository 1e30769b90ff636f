import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { ConfigError, UnavailableError } from "../../errors.ts";
import type {
  EmbeddingSpace,
  VectorIndex,
  VectorMatch,
  VectorQuery,
  VectorRecord,
} from "../../ports/vector-index.ts";
import { assertValidSpace, checkQuery, checkRecords, sameSpace, spaceMismatch } from "./vector-checks.ts";

/**
 * A flat, exact vector index held in memory and persisted to a folder:
 *   - `index.json`: the header: format version, the EmbeddingSpace, a generation number, and per
 *     record its key, type and metadata, in slot order;
 *   - `vectors-<generation>.f32`: the vectors, little-endian float32, slot after slot.
 * Every write produces a new generation: the vectors file is written to a temporary name and
 * renamed, then the header likewise; the header's rename is the commit point, so a crash leaves
 * either the old or the new state, never a mix. The previous vectors file is removed afterwards.
 *
 * Queries compute the exact cosine similarity against every record (O(n · dimension)): right for
 * the local mode's thousands of records, not for millions. One process owns a folder at a time.
 */
const HEADER = "index.json";
const FORMAT = "arbor-vector-index";

const MetadataValue = z.union([z.string(), z.number(), z.boolean()]);
const HeaderSchema = z.object({
  format: z.literal(FORMAT),
  version: z.literal(1),
  space: z.object({ embedderId: z.string().min(1), dimension: z.number().int().min(1) }),
  generation: z.number().int().min(0),
  vectorsFile: z.string().regex(/^vectors-\d+\.f32$/),
  records: z.array(
    z.object({ key: z.string(), type: z.string(), metadata: z.record(z.string(), MetadataValue) }),
  ),
});
type Header = z.infer<typeof HeaderSchema>;

interface Slot {
  key: string;
  type: string;
  metadata: Record<string, string | number | boolean>;
  vector: Float32Array;
  norm: number;
}

export class LocalVectorIndex implements VectorIndex {
  readonly space: EmbeddingSpace;
  private readonly dir: string;
  private slots: Slot[];
  private readonly byKey = new Map<string, number>();
  private generation: number;
  /** Writes are serialised: each waits for the previous one. */
  private writing: Promise<void> = Promise.resolve();

  private constructor(dir: string, space: EmbeddingSpace, slots: Slot[], generation: number) {
    this.dir = dir;
    this.space = { embedderId: space.embedderId, dimension: space.dimension };
    this.slots = slots;
    this.generation = generation;
    for (const [i, s] of slots.entries()) this.byKey.set(s.key, i);
  }

  /**
   * Opens the index in folder `dir` (created when missing). Refuses, with a ConfigError naming both
   * spaces, a folder written for another embedding space.
   */
  static async open(dir: string, space: EmbeddingSpace): Promise<LocalVectorIndex> {
    assertValidSpace(space);
    let raw: string;
    try {
      raw = await readFile(join(dir, HEADER), "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
        throw new UnavailableError(`Cannot read vector index ${dir}`, { cause: e });
      }
      await mkdir(dir, { recursive: true });
      return new LocalVectorIndex(dir, space, [], 0);
    }
    const parsed = HeaderSchema.safeParse(safeJson(raw));
    if (!parsed.success) {
      throw new ConfigError(`${join(dir, HEADER)} is not an Arbor vector index header (or is corrupt)`, {
        cause: parsed.error,
      });
    }
    const header = parsed.data;
    if (!sameSpace(header.space, space)) throw spaceMismatch(`at ${dir}`, header.space, space);
    const bytes = await readFile(join(dir, header.vectorsFile)).catch((e: unknown) => {
      throw new ConfigError(`Vector index ${dir}: ${header.vectorsFile} is missing`, { cause: e });
    });
    const { dimension } = header.space;
    if (bytes.length !== header.records.length * dimension * 4) {
      throw new ConfigError(
        `Vector index ${dir}: ${header.vectorsFile} holds ${bytes.length} bytes, expected ${header.records.length * dimension * 4}`,
      );
    }
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const slots = header.records.map((r, i): Slot => {
      const vector = new Float32Array(dimension);
      let norm = 0;
      for (let d = 0; d < dimension; d++) {
        const v = view.getFloat32((i * dimension + d) * 4, true);
        vector[d] = v;
        norm += v * v;
      }
      return { ...r, vector, norm: Math.sqrt(norm) };
    });
    return new LocalVectorIndex(dir, space, slots, header.generation);
  }

  /** Number of records. */
  get size(): number {
    return this.slots.length;
  }

  async upsert(records: readonly VectorRecord[]): Promise<void> {
    checkRecords(records, this.space.dimension);
    if (records.length === 0) return;
    await this.mutate(() => {
      for (const r of records) {
        const slot: Slot = {
          key: r.key,
          type: r.type,
          metadata: { ...(r.metadata ?? {}) },
          vector: Float32Array.from(r.vector),
          norm: Math.sqrt(r.vector.reduce((s, v) => s + v * v, 0)),
        };
        const at = this.byKey.get(r.key);
        if (at === undefined) {
          this.byKey.set(r.key, this.slots.length);
          this.slots.push(slot);
        } else {
          this.slots[at] = slot;
        }
      }
    });
  }

  async delete(keys: readonly string[]): Promise<void> {
    const doomed = new Set(keys.filter((k) => this.byKey.has(k)));
    if (doomed.size === 0) return;
    await this.mutate(() => {
      this.slots = this.slots.filter((s) => !doomed.has(s.key));
      this.byKey.clear();
      for (const [i, s] of this.slots.entries()) this.byKey.set(s.key, i);
    });
  }

  async query(query: VectorQuery): Promise<VectorMatch[]> {
    const qNorm = Math.sqrt(checkQuery(query, this.space.dimension));
    const q = query.vector;
    const scored: VectorMatch[] = [];
    for (const s of this.slots) {
      if (query.type !== undefined && s.type !== query.type) continue;
      if (query.keyPrefix !== undefined && !s.key.startsWith(query.keyPrefix)) continue;
      let dot = 0;
      for (let d = 0; d < q.length; d++) dot += (q[d] as number) * (s.vector[d] as number);
      scored.push({ key: s.key, score: dot / (qNorm * s.norm), type: s.type, metadata: { ...s.metadata } });
    }
    scored.sort((a, b) => b.score - a.score || (a.key < b.key ? -1 : 1));
    return scored.slice(0, query.topK);
  }

  /** Applies a change in memory and persists it; on a failed write the in-memory state is restored. */
  private mutate(change: () => void): Promise<void> {
    const run = this.writing.then(async () => {
      const before = { slots: [...this.slots], byKey: new Map(this.byKey) };
      change();
      try {
        await this.persist();
      } catch (e) {
        this.slots = before.slots;
        this.byKey.clear();
        for (const [k, v] of before.byKey) this.byKey.set(k, v);
        throw new UnavailableError(`Cannot write vector index ${this.dir}`, { cause: e });
      }
    });
    this.writing = run.catch(() => undefined);
    return run;
  }

  private async persist(): Promise<void> {
    const generation = this.generation + 1;
    const { dimension } = this.space;
    const bytes = Buffer.alloc(this.slots.length * dimension * 4);
    this.slots.forEach((s, i) => {
      for (let d = 0; d < dimension; d++) bytes.writeFloatLE(s.vector[d] as number, (i * dimension + d) * 4);
    });
    const header: Header = {
      format: FORMAT,
      version: 1,
      space: this.space,
      generation,
      vectorsFile: `vectors-${generation}.f32`,
      records: this.slots.map((s) => ({ key: s.key, type: s.type, metadata: s.metadata })),
    };
    await atomicWrite(join(this.dir, header.vectorsFile), bytes);
    await atomicWrite(join(this.dir, HEADER), JSON.stringify(header));
    const previous = `vectors-${this.generation}.f32`;
    this.generation = generation;
    await rm(join(this.dir, previous), { force: true });
  }
}

async function atomicWrite(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, data, { flush: true });
  await rename(tmp, path);
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
