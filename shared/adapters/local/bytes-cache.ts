/**
 * Bytes by key (null: known absent) within a byte budget and an entry limit: what the local object
 * stores keep in memory. Objects larger than an eighth of the budget are not held.
 *
 * The budget counts what an entry costs, not only its bytes: its key (a URN of 100-200 characters,
 * about as long as a small object's body) and ENTRY_OVERHEAD for the Map's slot and the entry. A
 * "known absent" entry costs its key and the overhead too: counting bytes alone let 200,000 of
 * them, or as many keys of small objects, pass for nothing.
 *
 * Eviction is "second chance" (CLOCK) rather than strict LRU: a read only marks its entry as used,
 * and the entries are kept in insertion order. When the cache is over its limits, the oldest entries
 * go, except those read since they were last looked at, which move to the newest end once.
 *
 * Why not LRU: an LRU over a Map moves every hit to the end (a delete and a set), which leaves a
 * hole in the Map's table each time; with tens of thousands of entries (a 10,000-task tree) each
 * read cost ~4 us instead of ~0.1, and creating the iterator that finds the oldest entry walked
 * past the holes on every write (~100 us a write at 150,000 entries). Here a read changes nothing
 * in the Map, a rewrite of a key keeps its place, and eviction makes room for a tenth of the
 * limits at a time, so the iterator is created once per batch.
 */
interface Entry {
  bytes: Uint8Array | null;
  /** Read since eviction last looked at it. */
  used: boolean;
}

export const MAX_ENTRIES = 200_000;
/**
 * What the local object stores hold by default: an object is kept beside its parsed resource
 * (store/resource-store.ts), about as big again on the heap. Sized to fill quickly: under a
 * steady 3 requests a second (measured: about 24 KB of cost each, as most writes rewrite a task
 * already held) 8 MiB is full within about 2 minutes, after which the process holds its size
 * (issue 22); 16 MiB took 4 minutes and 64 MiB over 20, and RSS grew all that time. The hot path
 * reads the objects of requests in flight (a 111-task tree writes about 0.5 MB), and what is not
 * held is one indexed read from SQLite's page cache.
 */
export const DEFAULT_CACHE_BYTES = 8 * 1024 * 1024;
/** Bytes an entry costs beyond its key's characters and its body: the Map's slot, the entry, the key's header. */
export const ENTRY_OVERHEAD = 96;

const cost = (key: string, bytes: Uint8Array | null): number =>
  key.length + ENTRY_OVERHEAD + (bytes?.byteLength ?? 0);

export class BytesCache {
  readonly #maxBytes: number;
  readonly #maxEntries: number;
  readonly #entries = new Map<string, Entry>();
  #held = 0;

  constructor(maxBytes: number, maxEntries = MAX_ENTRIES) {
    this.#maxBytes = maxBytes;
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** What the entries cost: their bytes, keys and ENTRY_OVERHEAD each. */
  get heldBytes(): number {
    return this.#held;
  }

  get(key: string): Uint8Array | null | undefined {
    const hit = this.#entries.get(key);
    if (hit === undefined) return undefined;
    hit.used = true;
    return hit.bytes;
  }

  set(key: string, bytes: Uint8Array | null): void {
    if (this.#maxBytes <= 0) return;
    if (bytes && bytes.byteLength > this.#maxBytes / 8) {
      this.delete(key); // too big to be worth holding
      return;
    }
    const old = this.#entries.get(key);
    if (old) {
      // Rewritten in place: its slot in the Map stays, as if read.
      this.#held += (bytes?.byteLength ?? 0) - (old.bytes?.byteLength ?? 0);
      old.bytes = bytes;
      old.used = true;
    } else {
      this.#entries.set(key, { bytes, used: false });
      this.#held += cost(key, bytes);
    }
    if (this.#held > this.#maxBytes || this.#entries.size > this.#maxEntries) this.#evict();
  }

  delete(key: string): void {
    const old = this.#entries.get(key);
    if (!old) return;
    this.#held -= cost(key, old.bytes);
    this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
    this.#held = 0;
  }

  /** Down to nine tenths of both limits, oldest first, giving each entry read since a second chance. */
  #evict(): void {
    const bytesGoal = this.#maxBytes * 0.9;
    const entriesGoal = Math.floor(this.#maxEntries * 0.9);
    // Each entry is looked at most twice: once (its mark cleared, moved to the end), then evicted.
    let budget = 2 * this.#entries.size;
    for (const [key, entry] of this.#entries) {
      if ((this.#held <= bytesGoal && this.#entries.size <= entriesGoal) || budget-- <= 0) break;
      this.#entries.delete(key);
      if (entry.used) {
        entry.used = false;
        this.#entries.set(key, entry); // visited again later in this same loop if need be
      } else {
        this.#held -= cost(key, entry.bytes);
      }
    }
  }
}
