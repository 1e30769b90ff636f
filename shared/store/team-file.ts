import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { MAX_TEAM_FILE_BYTES, parseTeam, type TeamFile } from "../domain/team.ts";
import { ConfigError, ValidationError } from "../kernel/errors.ts";

/**
 * A team file from disk (`arbor team apply <file>`, ARBOR_TEAM_FILE, `-c team=<file>` at synth):
 * at most MAX_TEAM_FILE_BYTES of a regular file, JSON, then parseTeam against `toolNames`. Every
 * reader goes through here, so a file the deploy accepts is one the functions accept.
 * `what` names the file in messages (`ARBOR_TEAM_FILE /x/team.json`).
 */
export function readTeamFile(
  file: string,
  toolNames: readonly string[],
  what = `The team file ${file}`,
): TeamFile {
  return parseTeam(readTeamJson(file, what), toolNames, what);
}

/** The file's JSON, unchecked (a route sends it as the body; the server checks it). */
export function readTeamJson(file: string, what = `The team file ${file}`): unknown {
  let text: string;
  try {
    const fd = openSync(file, "r");
    try {
      const stat = fstatSync(fd);
      const problem = !stat.isFile()
        ? "it is not a regular file"
        : stat.size > MAX_TEAM_FILE_BYTES
          ? `it is larger than ${MAX_TEAM_FILE_BYTES} bytes (a team has at most 100 assistants)`
          : undefined;
      if (problem) throw new ConfigError(`${what} cannot be read: ${problem}`);
      const buffer = Buffer.alloc(stat.size);
      let read = 0;
      while (read < stat.size) {
        const n = readSync(fd, buffer, read, stat.size - read, read);
        if (n === 0) break;
        read += n;
      }
      text = buffer.subarray(0, read).toString("utf8");
    } finally {
      closeSync(fd);
    }
  } catch (cause) {
    if (cause instanceof ConfigError) throw cause;
    throw new ConfigError(`${what} cannot be read: ${(cause as Error).message}`, { cause });
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ValidationError(`${what} is not JSON (${(cause as Error).message})`);
  }
}
