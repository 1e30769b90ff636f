/** Freezes a plain value and everything in it, so that a shared copy cannot be changed by one holder. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) freezeWithin(value);
  return value;
}

/**
 * Freezes `value` (an object not frozen yet), then every object among its own enumerable values.
 * Arrays and plain objects (what JSON and the stores hold) are walked without making a list of
 * their values; anything else as Object.values lists them.
 */
function freezeWithin(value: object): void {
  Object.freeze(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === "object" && v !== null && !Object.isFrozen(v)) freezeWithin(v);
    }
    return;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    for (const v of Object.values(value))
      if (typeof v === "object" && v !== null && !Object.isFrozen(v)) freezeWithin(v);
    return;
  }
  // A plain object inherits no enumerable property, so for-in visits its own ones only.
  for (const k in value) {
    const v: unknown = (value as Record<string, unknown>)[k];
    if (typeof v === "object" && v !== null && !Object.isFrozen(v)) freezeWithin(v);
  }
}
