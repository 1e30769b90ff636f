#!/usr/bin/env node
// The `arbor` command. Node runs the TypeScript sources itself (type stripping, Node 24 and
// later), so a fresh clone needs no build step and no transpiler. This file is plain JavaScript
// so that an older Node gets a clear message instead of a stack trace. People read the CLI's
// own output; structured logs stay quiet unless asked for.
import module from "node:module";

const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  process.stderr.write(
    `arbor: Arbor needs Node.js 24 or newer and this is ${process.version}: install Node 24 (https://nodejs.org/en/download), or put npx -y -p node@24 before the command, e.g. npx -y -p node@24 npm start\n`,
  );
  process.exit(1);
}
if (!process.features.typescript) {
  process.stderr.write(
    "arbor: Arbor runs its TypeScript sources with Node's type stripping, which is turned off here (--no-experimental-strip-types): run it without that flag\n",
  );
  process.exit(1);
}

// Node keeps the compiled (and type-stripped) modules on disk, in the directory NODE_COMPILE_CACHE
// names or else below the temp directory: a start after the first compiles nothing again.
// NODE_DISABLE_COMPILE_CACHE=1 turns it off.
module.enableCompileCache();
process.env.POWERTOOLS_LOG_LEVEL ??= "WARN";
await import("./main.ts");
