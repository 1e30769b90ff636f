/**
 * Cutting text at a character count without cutting a character: JavaScript strings count UTF-16
 * units, and a character outside the BMP (an emoji, many CJK extensions) is two of them. A cut
 * between the two leaves a lone surrogate, which is not text: a model API may refuse the request,
 * and JSON or UTF-8 encoders replace or reject it.
 */

/** `kept`, or one less when a cut there would fall between the two halves of a character. */
export function wholeCharacters(text: string, kept: number): number {
  const before = text.charCodeAt(kept - 1);
  return kept > 0 && kept < text.length && before >= 0xd800 && before <= 0xdbff ? kept - 1 : kept;
}
