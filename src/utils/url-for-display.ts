/** Query parameters that carry credentials (`?key=`, `?api_key=`, `?sig=`, a signed URL's token…). */
const SECRET_PARAMETER = /key|token|secret|pass|sig|auth|credential|session|code/i;

/**
 * A URL as it may be shown, logged or stored beside an error: a password in it and the values of
 * query parameters named like credentials are hidden. Text that is not a URL comes back as it was.
 */
export function urlForDisplay(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return text;
  }
  if (!url.password && ![...url.searchParams.keys()].some((name) => SECRET_PARAMETER.test(name))) return text;
  if (url.password) url.password = "hidden";
  for (const name of [...url.searchParams.keys()]) if (SECRET_PARAMETER.test(name)) url.searchParams.set(name, "hidden");
  return url.href;
}
