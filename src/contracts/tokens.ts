/** Without a tokenizer, about four characters make a token in English text. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}
