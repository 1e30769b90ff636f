import { ConfigError } from "../../shared/kernel/errors.ts";
import type { LocalConfig } from "../../shared/runtime/config.ts";
import type { LocalRuntime, LocalRuntimeOptions } from "../../shared/runtime/local/local.ts";
import type { Command } from "../command.ts";

// The settings (config.ts and zod) and the runtime are imported when a command runs, not when
// the command table is read: `arbor help` loads neither.

/** The local settings, or the reason `command` cannot run here (ARBOR_MODE=aws). */
export async function localConfig(command: Pick<Command, "name" | "remote">): Promise<LocalConfig> {
  const { loadConfig } = await import("../../shared/runtime/config.ts");
  const config = loadConfig();
  if (config.mode !== "local")
    throw new ConfigError(
      `arbor ${command.name} works on the local data folder${command.remote ? ", or on a remote Arbor with ARBOR_URL and ARBOR_KEY" : ""}: unset ARBOR_MODE or set it to local`,
    );
  return config;
}

/**
 * Runs `fn` on the local runtime. A command that writes (`demo`) holds the data folder's lock as
 * `lockAs`; one that only reads takes none, so it works beside a running `arbor serve`.
 */
export async function withRuntime<T>(
  command: Pick<Command, "name" | "remote">,
  fn: (rt: LocalRuntime) => Promise<T>,
  options: { bus?: NonNullable<LocalRuntimeOptions["bus"]>; lockAs?: string } = {},
): Promise<T> {
  const config = await localConfig(command);
  const { createLocalRuntime } = await import("../../shared/runtime/local/local.ts");
  const rt = createLocalRuntime(config, options);
  try {
    return await fn(rt);
  } finally {
    await rt.close();
  }
}
