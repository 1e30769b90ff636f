#!/usr/bin/env node
// The `arbor` command. Runs the TypeScript sources directly through tsx, so a fresh clone needs
// no build step. People read the CLI's own output; structured logs stay quiet unless asked for.
import { register } from "tsx/esm/api";

process.env.POWERTOOLS_LOG_LEVEL ??= "WARN";
register();
await import("./main.ts");
