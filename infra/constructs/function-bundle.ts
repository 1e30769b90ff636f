import { copyFileSync, cpSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type BuildOptions, buildSync, type Metafile } from "esbuild";
import { ConfigError } from "../../shared/kernel/errors.ts";

/** The repository root: entries and node_modules are found from here. */
export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Packages kept out of the bundle and shipped as files (the context window's tokenizers). */
export const TOKENIZER_PACKAGES = ["gpt-tokenizer", "@anthropic-ai/tokenizer"] as const;

/**
 * What the tokenizers load, copied to `<bundle>/node_modules` (7.5 MB, without source maps and type
 * declarations): gpt-tokenizer's ESM build, @anthropic-ai/tokenizer's CommonJS build and the tiktoken
 * (lite, with its wasm) it requires. Inlined, their tables (4 MB) would cost every cold start seconds
 * of parsing, even in a function that never counts a token; apart, only a turn that counts loads them.
 */
const TOKENIZER_FILES = [
  "gpt-tokenizer/package.json",
  "gpt-tokenizer/esm",
  "@anthropic-ai/tokenizer/package.json",
  "@anthropic-ai/tokenizer/dist/cjs",
  "tiktoken/package.json",
  "tiktoken/lite",
] as const;

/**
 * A document's PDF is read on a worker thread (shared/knowledge/extract.ts): its script sits beside
 * the bundle's modules, plain JavaScript, and imports PDF.js's serverless build (unpdf) from the
 * bundle's node_modules. Shipped only with the entries that run the documents step (the engine's
 * steps share one handler); the API function holds the engine too, but never reads a document.
 */
const PDF_WORKER = "shared/knowledge/pdf-text-worker.mjs";
const PDF_READER_FILES = ["unpdf/package.json", "unpdf/dist"] as const;
const DOCUMENT_READERS = ["functions/engine-step.ts"] as const;

/** The Cedar policy engine reads its wasm next to the module that loads it (`__dirname`). */
const CEDAR_WASM = "@cedar-policy/cedar-wasm/nodejs/cedar_wasm_bg.wasm";

/**
 * Every function's esbuild options. ESM, minified (names kept: error classes name themselves after
 * their constructor, and logs should read), source maps without the sources, the AWS SDK inside (the
 * engine needs clients, S3 Vectors among them, at the versions it was tested with, not whatever the
 * Lambda runtime ships).
 *
 * Split into chunks: what a module loads with `import()` (the MCP and A2A clients, undici, the graph's
 * RDF library, OPA's loader, the OpenTelemetry SDK...) is a file of its own, read and compiled when a
 * call first needs it, not at every cold start. The chunks sit beside the handler's file, so `__dirname` is the
 * bundle's root in all of them. The banner gives each file the `require`, `__filename` and `__dirname`
 * that ESM lacks and the CommonJS modules inside expect.
 */
export function bundleOptions(entry: string, outdir: string): BuildOptions & { metafile: true } {
  return {
    entryPoints: { index: entry },
    outdir,
    // The metafile's paths, relative to the repository whatever the working directory.
    absWorkingDir: PROJECT_ROOT,
    outExtension: { ".js": ".mjs" },
    chunkNames: "chunk-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node24",
    mainFields: ["module", "main"],
    external: [...TOKENIZER_PACKAGES],
    minify: true,
    keepNames: true,
    sourcemap: true,
    sourcesContent: false,
    banner: {
      js:
        "import { createRequire as __arborRequire } from 'node:module'; const require = __arborRequire(import.meta.url);" +
        " import { fileURLToPath as __arborPath } from 'node:url'; const __filename = __arborPath(import.meta.url);" +
        " const __dirname = __arborPath(new URL('.', import.meta.url));",
    },
    metafile: true,
    logLevel: "error",
  };
}

/** Checks the files to ship in a bundle's root: plain names, absolute sources (at synth). */
export function checkBundledFiles(files: Readonly<Record<string, string>>): void {
  for (const [name, source] of Object.entries(files)) {
    if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith("."))
      throw new ConfigError(
        `Bundled file name ${JSON.stringify(name)}: give a plain file name, e.g. tools.json`,
      );
    if (!isAbsolute(source))
      throw new ConfigError(`Bundled file ${name}: ${source} must be an absolute path`);
  }
}

/**
 * Builds one function's bundle into `outdir` (emptied first): the handler's `index` module and its
 * chunks, the Cedar wasm, the tokenizers under `node_modules`, and `files` (name in the bundle ->
 * absolute path at synth, e.g. the team or tool registry) in its root. Answers esbuild's metafile.
 */
export function buildFunctionBundle(
  entry: string,
  outdir: string,
  files: Readonly<Record<string, string>> = {},
): Metafile {
  checkBundledFiles(files);
  if (!existsSync(entry)) throw new ConfigError(`Function entry ${entry} does not exist`);
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(outdir, { recursive: true });
  const { metafile } = buildSync(bundleOptions(entry, outdir));
  const modules = join(PROJECT_ROOT, "node_modules");
  copyFileSync(join(modules, CEDAR_WASM), join(outdir, "cedar_wasm_bg.wasm"));
  for (const path of TOKENIZER_FILES)
    cpSync(join(modules, path), join(outdir, "node_modules", path), {
      recursive: true,
      filter: (from) => !from.endsWith(".map") && !from.endsWith(".d.ts"),
    });
  if (DOCUMENT_READERS.some((reader) => resolve(PROJECT_ROOT, reader) === resolve(entry))) {
    copyFileSync(join(PROJECT_ROOT, PDF_WORKER), join(outdir, "pdf-text-worker.mjs"));
    for (const path of PDF_READER_FILES)
      cpSync(join(modules, path), join(outdir, "node_modules", path), {
        recursive: true,
        filter: (from) => !from.endsWith(".map") && !from.endsWith(".d.ts") && !from.endsWith(".d.mts"),
      });
  }
  for (const [name, source] of Object.entries(files)) copyFileSync(source, join(outdir, name));
  return metafile;
}
