// The thread a ThreadedVectorIndex runs its index on: TypeScript sources are loaded through tsx,
// as the CLI loads them (bin.mjs); a new thread needs its own registration.
import { register } from "tsx/esm/api";

register();
await import("./vector-index-thread.ts");
