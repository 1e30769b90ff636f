/** The V8 flags the arbor command sets in its own process (v8-flags.mjs); empty when its V8 needs none. */
export declare const V8_WORKAROUND_FLAGS: readonly string[];
