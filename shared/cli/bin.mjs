#!/usr/bin/env node
// The `arbor` command. Node runs the TypeScript sources itself (type stripping, Node 24 and
// later), so a fresh clone needs no build step and no transpiler. This file is plain JavaScript
// so that an older Node gets a clear message instead of a stack trace. People read the CLI's
// own output; structured logs stay quiet unless asked for.
const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  process.stderr.write(
    `arbor: Arbor needs Node.js 24 or newer and this is ${process.version}: install Node 24 (https://nodejs.org/en/download), or put npx -p node@24 before the command, e.g. npx -p node@24 npm start\n`,
  );
  process.exit(1);
}
if (!process.features.typescript) {
  process.stderr.write(
    "arbor: Arbor runs its TypeScript sources with Node's type stripping, which is turned off here (--no-experimental-strip-types): run it without that flag\n",
  );
  process.exit(1);
}

process.env.POWERTOOLS_LOG_LEVEL ??= "WARN";
await import("./main.ts");
