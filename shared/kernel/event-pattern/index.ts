export { compilePattern, type EventPattern, matchesPattern, validatePattern } from "./matcher.ts";
