export type TokenCounter = (text: string) => number;

/** Cuts text to at most `budget` tokens, keeping the start. */
export function fitText(text: string, budget: number, count: TokenCounter): { text: string; truncated: boolean } {
  if (count(text) <= budget) return { text, truncated: false };
  let length = Math.floor(text.length * (budget / Math.max(1, count(text))));
  while (length > 0 && count(text.slice(0, length) + "…") > budget) length = Math.floor(length * 0.9);
  return { text: length > 0 ? `${text.slice(0, length)}…` : "", truncated: true };
}

/** Keeps whole items, in the order given, while they fit in the budget; `kept` is how many did. */
export function fitItems(items: readonly string[], budget: number, count: TokenCounter): { kept: string[]; truncated: boolean } {
  const kept: string[] = [];
  let used = 0;
  for (const item of items) {
    const cost = count(item) + 1;
    if (used + cost > budget) return { kept, truncated: true };
    kept.push(item);
    used += cost;
  }
  return { kept, truncated: false };
}

/** The share of a section's budget kept for the summary of what did not fit. */
export const SUMMARY_SHARE = 0.25;
