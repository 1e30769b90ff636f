#!/usr/bin/env node
// The `arbor` command. Runs the TypeScript sources directly through tsx, so a fresh clone needs
// no build step. People read the CLI's own output; structured logs stay quiet unless asked for.
// The V8 flags come first, before any code runs hot enough to be optimised (see v8-flags.mjs).
import "./v8-flags.mjs";
import { register } from "tsx/esm/api";

process.env.POWERTOOLS_LOG_LEVEL ??= "WARN";
register();
await import("./main.ts");
