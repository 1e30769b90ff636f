/**
 * Keeps an insertion-ordered Map within `max` entries by dropping its oldest ones, a tenth of the
 * limit at a time.
 *
 * Dropping one entry per insertion (`map.delete(map.keys().next().value)`) looks O(1) but is not:
 * a deleted entry stays a hole in V8's table until the table is rebuilt, and every new iterator
 * walks past the holes at the front. At 100,000 entries each insertion then cost 10-300 us, more
 * the longer the process ran. One iterator per batch makes it O(1) per insertion again.
 */
export function trimOldest<K, V>(map: Map<K, V>, max: number): void {
  if (map.size <= max) return;
  const goal = Math.max(0, max - Math.ceil(max / 10));
  for (const key of map.keys()) {
    if (map.size <= goal) break;
    map.delete(key);
  }
}
