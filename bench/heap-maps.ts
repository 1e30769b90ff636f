import { readFileSync } from "node:fs";

/**
 * Which Maps and Sets grow: every Map, Set and WeakMap of a V8 heap snapshot, named by what holds
 * it (`SqliteStateStore.#cache`, `context.parsed` for a module's `const parsed = new Map()`), with
 * its entry count (read from its hash table) and the bytes of the table; then, from the first file
 * to each later one, the holders whose entries changed most. heap-compare.ts says what kind of
 * object grew; this says in which collection.
 *
 *   node --max-old-space-size=6000 bench/heap-maps.ts <first> <later>... [--top 30]
 */
interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: [string[], ...unknown[]];
      edge_fields: string[];
      edge_types: [string[]];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Held {
  count: number;
  entries: number;
  tableBytes: number;
}

const COLLECTIONS = new Set(["Map", "Set", "WeakMap", "WeakSet"]);

function census(file: string): Map<string, Held> {
  const s = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const nf = s.snapshot.meta.node_fields;
  const ef = s.snapshot.meta.edge_fields;
  const [nw, ew] = [nf.length, ef.length];
  const [typeAt, nameAt, sizeAt, edgeCountAt] = ["type", "name", "self_size", "edge_count"].map((f) =>
    nf.indexOf(f),
  ) as [number, number, number, number];
  const [eTypeAt, eNameAt, eToAt] = ["type", "name_or_index", "to_node"].map((f) => ef.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const nodeTypes = s.snapshot.meta.node_types[0];
  const edgeTypes = s.snapshot.meta.edge_types[0];
  const nodeCount = s.nodes.length / nw;
  const firstEdge = new Uint32Array(nodeCount + 1);
  for (let n = 0, e = 0; n < nodeCount; n++) {
    firstEdge[n] = e;
    e += (s.nodes[n * nw + edgeCountAt] as number) * ew;
    firstEdge[n + 1] = e;
  }
  const name = (n: number) => s.strings[s.nodes[n * nw + nameAt] as number] ?? "?";
  const type = (n: number) => nodeTypes[s.nodes[n * nw + typeAt] as number] ?? "?";
  const edgeName = (e: number) => {
    const t = edgeTypes[s.edges[e + eTypeAt] as number];
    const v = s.edges[e + eNameAt] as number;
    return t === "element" || t === "hidden" ? `[${v}]` : (s.strings[v] ?? "?");
  };
  // The collections, and who points at each (the first strong, named edge).
  const isCollection = new Uint8Array(nodeCount);
  for (let n = 0; n < nodeCount; n++)
    if (type(n) === "object" && COLLECTIONS.has(name(n))) isCollection[n] = 1;
  const holder = new Map<number, string>();
  for (let n = 0; n < nodeCount; n++) {
    for (let e = firstEdge[n] as number; e < (firstEdge[n + 1] as number); e += ew) {
      const to = (s.edges[e + eToAt] as number) / nw;
      if (!isCollection[to]) continue;
      const et = edgeTypes[s.edges[e + eTypeAt] as number];
      if (et === "weak" || et === "shortcut") continue;
      const synthetic = type(n) === "synthetic";
      if (holder.has(to) && (synthetic || !(holder.get(to) as string).startsWith("("))) continue;
      const from =
        name(n) === "system / Context"
          ? "context"
          : type(n) === "object"
            ? name(n)
            : `(${type(n)} ${name(n)})`;
      holder.set(to, `${from.slice(0, 60)}.${edgeName(e)}`);
    }
  }
  const out = new Map<string, Held>();
  for (let n = 0; n < nodeCount; n++) {
    if (!isCollection[n]) continue;
    let entries = 0;
    let tableBytes = 0;
    for (let e = firstEdge[n] as number; e < (firstEdge[n + 1] as number); e += ew) {
      if (edgeName(e) !== "table") continue;
      const t = (s.edges[e + eToAt] as number) / nw;
      tableBytes = s.nodes[t * nw + sizeAt] as number;
      // The table's references to what it holds (keys and values: a Map counts each entry twice).
      for (let te = firstEdge[t] as number; te < (firstEdge[t + 1] as number); te += ew) {
        const to = (s.edges[te + eToAt] as number) / nw;
        if (type(to) !== "hidden" || name(to) !== "system / Oddball") entries++;
      }
    }
    const kind = name(n);
    if (kind === "Map" || kind === "WeakMap") entries = Math.floor(entries / 2);
    const key = `${kind} ${holder.get(n) ?? "(no strong holder)"}`;
    const h = out.get(key) ?? { count: 0, entries: 0, tableBytes: 0 };
    h.count++;
    h.entries += entries;
    h.tableBytes += tableBytes;
    out.set(key, h);
  }
  return out;
}

const argv = process.argv.slice(2);
const topAt = argv.indexOf("--top");
const top = topAt >= 0 ? Number(argv.splice(topAt, 2)[1]) : 30;
const [firstFile, ...later] = argv;
if (!firstFile) throw new Error("heap-maps <first.heapsnapshot> [<later.heapsnapshot>...]");
const first = census(firstFile);
const line = (k: string, h: Held, d?: Held) =>
  `  ${String(h.entries).padStart(8)} entries${d ? ` (${d.entries >= 0 ? "+" : ""}${d.entries})` : ""}  ` +
  `${(h.tableBytes / 1024).toFixed(0).padStart(7)} KB table  ${String(h.count).padStart(5)}x  ${k}\n`;
process.stdout.write(`${firstFile}: the largest collections\n`);
for (const [k, h] of [...first].sort((a, b) => b[1].entries - a[1].entries).slice(0, top))
  process.stdout.write(line(k, h));
for (const file of later) {
  const next = census(file);
  process.stdout.write(`\n${file}: largest change in entries\n`);
  const rows = [...new Set([...first.keys(), ...next.keys()])].map((k) => {
    const a = first.get(k) ?? { count: 0, entries: 0, tableBytes: 0 };
    const b = next.get(k) ?? { count: 0, entries: 0, tableBytes: 0 };
    return {
      k,
      b,
      d: {
        count: b.count - a.count,
        entries: b.entries - a.entries,
        tableBytes: b.tableBytes - a.tableBytes,
      },
    };
  });
  for (const r of rows.sort((x, y) => Math.abs(y.d.entries) - Math.abs(x.d.entries)).slice(0, top))
    process.stdout.write(line(r.k, r.b, r.d));
}
