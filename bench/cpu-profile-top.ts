import { readFileSync } from "node:fs";

/**
 * The top functions of `.cpuprofile` files by self time (and by total time, what they and their
 * callees took), one table per file:  node bench/cpu-profile-top.ts <file>... [--top 25]
 */
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const argv = process.argv.slice(2);
const option = (flag: string) => {
  const at = argv.indexOf(flag);
  return at >= 0 ? argv.splice(at, 2)[1] : undefined;
};
const top = Number(option("--top") ?? 25);
/** `--callers <text>`: also the call stacks (4 frames up) that lead to functions whose name holds <text>. */
const callersOf = option("--callers");
const files = argv;

for (const file of files) {
  const p = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Self time per node from the samples and their time deltas (microseconds).
  const selfUs = new Map<number, number>();
  for (const [i, id] of p.samples.entries()) selfUs.set(id, (selfUs.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  const name = (n: Node) => {
    const url = n.callFrame.url.replace(/^.*\/(node_modules\/|shared\/|bench\/)/, "$1");
    return `${n.callFrame.functionName || "(anonymous)"} ${url}:${n.callFrame.lineNumber + 1}`;
  };
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id) as Node;
    self.set(name(node), (self.get(name(node)) ?? 0) + us);
    // Total: once per distinct function on the stack.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const k = name(byId.get(at) as Node);
      if (seen.has(k)) continue;
      seen.add(k);
      total.set(k, (total.get(k) ?? 0) + us);
    }
  }
  const wallMs = (p.endTime - p.startTime) / 1000;
  const idle = self.get("(idle) :0") ?? 0;
  process.stdout.write(`\n${file}: ${wallMs.toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms\n`);
  const rows = (m: Map<string, number>, label: string) => {
    process.stdout.write(`  by ${label}:\n`);
    for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
      process.stdout.write(`    ${(us / 1000).toFixed(1).padStart(8)} ms  ${k}\n`);
  };
  rows(self, "self time");
  rows(total, "total time");
  if (callersOf) {
    const stacks = new Map<string, number>();
    for (const [id, us] of selfUs) {
      if (!name(byId.get(id) as Node).includes(callersOf)) continue;
      const frames: string[] = [];
      for (let at = parent.get(id); at !== undefined && frames.length < 4; at = parent.get(at))
        frames.push(name(byId.get(at) as Node));
      const k = frames.join(" <- ");
      stacks.set(k, (stacks.get(k) ?? 0) + us);
    }
    rows(stacks, `callers of ${callersOf}`);
  }
}
