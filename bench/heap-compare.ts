import { readFileSync } from "node:fs";

/**
 * Compares V8 heap snapshots (`.heapsnapshot`, from `--heapsnapshot-signal` or
 * `v8.writeHeapSnapshot`) by what they hold per constructor: object count and self size, and how
 * both changed from the first file to each later one, largest growth first.
 *
 *   node --max-old-space-size=8192 bench/heap-compare.ts <first> <later>... [--top 30]
 */
interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

interface Tally {
  count: number;
  bytes: number;
}

function tally(file: string): Map<string, Tally> {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const types = s.snapshot.meta.node_types[0];
  const byName = new Map<string, Tally>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt] as number] ?? "?";
    const name = s.strings[s.nodes[i + nameAt] as number] ?? "?";
    // Objects by constructor; strings, code, arrays and the rest by their type alone.
    const key =
      type === "object" || type === "closure" || type === "native"
        ? `${type === "object" ? "" : `(${type}) `}${name.slice(0, 80)}`
        : `(${type})`;
    const t = byName.get(key) ?? { count: 0, bytes: 0 };
    t.count++;
    t.bytes += s.nodes[i + sizeAt] as number;
    byName.set(key, t);
  }
  return byName;
}

const argv = process.argv.slice(2);
const topAt = argv.indexOf("--top");
const top = topAt >= 0 ? Number(argv.splice(topAt, 2)[1]) : 30;
const [firstFile, ...later] = argv;
if (!firstFile || later.length === 0)
  throw new Error("heap-compare <first.heapsnapshot> <later.heapsnapshot>...");
const first = tally(firstFile);
const total = (m: Map<string, Tally>) => [...m.values()].reduce((a, t) => a + t.bytes, 0);
process.stdout.write(`${firstFile}: ${(total(first) / 2 ** 20).toFixed(1)} MB\n`);
for (const file of later) {
  const next = tally(file);
  process.stdout.write(`\n${file}: ${(total(next) / 2 ** 20).toFixed(1)} MB; growth by constructor:\n`);
  const rows = [...new Set([...first.keys(), ...next.keys()])].map((k) => {
    const a = first.get(k) ?? { count: 0, bytes: 0 };
    const b = next.get(k) ?? { count: 0, bytes: 0 };
    return { k, count: b.count, dCount: b.count - a.count, bytes: b.bytes, dBytes: b.bytes - a.bytes };
  });
  for (const r of rows.sort((x, y) => y.dBytes - x.dBytes).slice(0, top))
    process.stdout.write(
      `  ${(r.dBytes / 1024).toFixed(0).padStart(9)} KB ${String(r.dCount).padStart(9)} objects  (now ${r.count}, ${(r.bytes / 1024).toFixed(0)} KB)  ${r.k}\n`,
    );
}
