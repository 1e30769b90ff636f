import type { Priority } from "./resources.ts";

/**
 * The scheduler policy of seeds/002: ready work runs by priority (foreground, normal, background),
 * then oldest first. Pure; the local runtime's queue and the bench use it.
 */
export interface Schedulable {
  priority: Priority;
  /** ISO 8601 */
  createdAt: string;
}

const ORDER: Record<Priority, number> = { foreground: 0, normal: 1, background: 2 };

export function compareSchedulable(a: Schedulable, b: Schedulable): number {
  return (
    ORDER[a.priority] - ORDER[b.priority] ||
    (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0)
  );
}

export const schedule = <T extends Schedulable>(items: readonly T[]): T[] =>
  [...items].sort(compareSchedulable);
