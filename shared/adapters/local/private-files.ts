import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * A local data folder holds every tenant's data: only its owner may read it. Folders are 0700,
 * files 0600, whatever the umask (a mode given at creation can only lose bits to the umask, and
 * an existing file is chmod-ed). SQLite gives its -wal, -shm and -journal files the mode of the
 * database file, so creating the database file 0600 first is enough for those.
 */
export const PRIVATE_DIR = 0o700;
export const PRIVATE_FILE = 0o600;

/** Creates `dir` (and missing parents) 0700, and makes `dir` itself 0700 if it exists. */
export function privateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR });
  chmodSync(dir, PRIVATE_DIR);
}

/** Creates `file` empty with mode 0600 if missing; makes it 0600 if it exists. */
export function privateFile(file: string): void {
  closeSync(openSync(file, "a", PRIVATE_FILE));
  chmodSync(file, PRIVATE_FILE);
}

/**
 * Tightens what a data folder already holds (written by an older Arbor, or under a loose umask):
 * the folder and every folder below it 0700, every file 0600. Symbolic links are left alone.
 */
export function tightenTree(path: string): void {
  let stat: ReturnType<typeof lstatSync>;
  try {
    stat = lstatSync(path);
  } catch {
    return; // not there (yet)
  }
  if (stat.isSymbolicLink()) return;
  if (stat.isDirectory()) {
    if ((stat.mode & 0o777) !== PRIVATE_DIR) chmodSync(path, PRIVATE_DIR);
    for (const entry of readdirSync(path)) tightenTree(join(path, entry));
  } else if (stat.isFile() && (stat.mode & 0o777) !== PRIVATE_FILE) {
    chmodSync(path, PRIVATE_FILE);
  }
}
