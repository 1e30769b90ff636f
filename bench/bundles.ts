import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Metafile } from "esbuild";
import { buildFunctionBundle, PROJECT_ROOT } from "../infra/constructs/function-bundle.ts";

/**
 * `npm run bench:bundles`: each Lambda function's bundle as `cdk synth` builds it (function-bundle.ts:
 * ESM, minified, split into chunks, the AWS SDK inside, the tokenizers outside), what an import
 * reads of it and its whole size, what is biggest in what it reads, and how long importing it takes
 * over bare Node: the part of a cold start that is the code's (Lambda adds its own before). Each
 * import runs in a fresh process, `--runs` times (default 7), and the median is printed, wall and CPU.
 *
 *   npm run bench:bundles -- --runs 11
 */
const FUNCTIONS = ["api", "engine-step", "tool", "notify", "watchdog"] as const;

const runs = (() => {
  const i = process.argv.indexOf("--runs");
  const n = i >= 0 ? Number(process.argv[i + 1]) : 7;
  if (!Number.isInteger(n) || n < 1) throw new Error("--runs takes a whole number of runs, e.g. --runs 7");
  return n;
})();

/** Imports `file` in a fresh Node and answers the import's wall and CPU milliseconds. */
function importTime(file: string | undefined): { wallMs: number; cpuMs: number } {
  const script = `
    const t = performance.now(); const c = process.cpuUsage();
    ${file ? `await import(${JSON.stringify(file)});` : ""}
    const u = process.cpuUsage(c);
    process.stdout.write(JSON.stringify({ wallMs: performance.now() - t, cpuMs: (u.user + u.system) / 1000 }));
    process.exit(0);`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    // What the function's environment has at import (the handlers read the rest at the first call).
    env: { PATH: process.env.PATH ?? "", AWS_REGION: "us-east-1", NODE_OPTIONS: "" },
    encoding: "utf8",
  });
  return JSON.parse(out) as { wallMs: number; cpuMs: number };
}

/** The output files a fresh import of the bundle reads: the handler and its static imports, transitively. */
function staticallyLoaded(metafile: Metafile): Set<string> {
  const entry = Object.entries(metafile.outputs).find(([, o]) => o.entryPoint?.startsWith("functions/"))?.[0];
  const seen = new Set<string>();
  const queue = entry ? [entry] : [];
  for (let path = queue.pop(); path !== undefined; path = queue.pop()) {
    if (seen.has(path)) continue;
    seen.add(path);
    for (const i of metafile.outputs[path]?.imports ?? [])
      if (i.kind === "import-statement" && !i.external) queue.push(i.path);
  }
  return seen;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const dir = mkdtempSync(join(tmpdir(), "arbor-bundles-"));
try {
  const rows: string[] = [];
  for (const name of FUNCTIONS) {
    const outdir = join(dir, name);
    const metafile = buildFunctionBundle(join(PROJECT_ROOT, "functions", `${name}.ts`), outdir);
    const file = join(outdir, "index.mjs");
    // What a cold start reads: the handler's file and the chunks it imports statically; the rest
    // (import() at first use) is loaded by the calls that need it.
    const atStart = staticallyLoaded(metafile);
    const byPackage = new Map<string, number>();
    for (const [path, output] of Object.entries(metafile.outputs))
      for (const [input, { bytesInOutput }] of atStart.has(path) ? Object.entries(output.inputs) : []) {
        const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? input.split("/")[0] ?? input;
        byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + bytesInOutput);
      }
    const biggest = [...byPackage]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([p, n]) => `${p} ${Math.round(n / 1024)} KB`)
      .join(", ");
    const bare: number[] = [];
    const walls: number[] = [];
    const cpus: number[] = [];
    for (let i = 0; i < runs; i++) {
      bare.push(importTime(undefined).wallMs);
      const t = importTime(file);
      walls.push(t.wallMs);
      cpus.push(t.cpuMs);
    }
    const size = (paths: Iterable<string>) =>
      `${([...paths].reduce((n, p) => n + (metafile.outputs[p]?.bytes ?? 0), 0) / 1024 / 1024).toFixed(2)} MB`;
    const code = Object.keys(metafile.outputs).filter((p) => p.endsWith(".mjs"));
    rows.push(
      `| ${name} | ${size(atStart)} | ${size(code)} in ${code.length} files | ${Math.round(median(walls) - median(bare))} ms | ${Math.round(median(cpus))} ms | ${biggest} |`,
    );
    process.stderr.write(`  ${name}: built and imported ${runs} times\n`);
  }
  process.stdout.write(
    [
      "",
      `Function bundles (esbuild as cdk synth runs it; import: median of ${runs} fresh processes, over bare Node)`,
      "| function | loaded at import | whole bundle | import, wall | import, CPU | biggest parts loaded at import |",
      "|---|---|---|---|---|---|",
      ...rows,
      "",
    ].join("\n"),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
