// Summaries the benches share.

/** The middle value (the upper of the two middle ones for an even count). */
export function median(numbers: number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** `[min–max]`, with `digits` decimals. */
export function spread(numbers: number[], digits = 3): string {
  return `[${Math.min(...numbers).toFixed(digits)}–${Math.max(...numbers).toFixed(digits)}]`;
}
