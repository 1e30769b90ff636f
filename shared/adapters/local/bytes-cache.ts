/**
 * Bytes by key (null: known absent), least recently used first, within a byte budget: what the
 * local object stores keep in memory. Objects larger than an eighth of the budget are not held.
 */
export class BytesCache {
  readonly #maxBytes: number;
  readonly #entries = new Map<string, Uint8Array | null>();
  #held = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  get(key: string): Uint8Array | null | undefined {
    const hit = this.#entries.get(key);
    if (hit === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, hit);
    return hit;
  }

  set(key: string, bytes: Uint8Array | null): void {
    this.delete(key);
    if (this.#maxBytes <= 0) return;
    if (bytes && bytes.byteLength > this.#maxBytes / 8) return; // too big to be worth holding
    this.#entries.set(key, bytes);
    this.#held += bytes?.byteLength ?? 0;
    for (const oldest of this.#entries.keys()) {
      if (this.#held <= this.#maxBytes && this.#entries.size <= 200_000) break;
      this.delete(oldest);
    }
  }

  delete(key: string): void {
    const old = this.#entries.get(key);
    if (old) this.#held -= old.byteLength;
    this.#entries.delete(key);
  }

  clear(): void {
    this.#entries.clear();
    this.#held = 0;
  }
}
