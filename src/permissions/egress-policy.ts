import type { PermissionsConfig } from "../config/config-schemas.js";

/** An approval that covers a host, for every tool that sends there and in every workspace. */
export const HOST_APPROVAL_PREFIX = "host:";
/** Host approvals hold in any workspace: they are about where data goes, not where the task works. */
export const ANY_WORKSPACE = "*";

/** What the host policy says of one outbound request. */
export type EgressVerdict = { kind: "go" } | { kind: "deny"; host: string } | { kind: "ask"; hosts: string[]; reason: string };

/** A host name as DNS reads it: lower-cased, without the root's trailing dot (`evil.com.` is `evil.com`). */
export function canonicalHost(host: string): string {
  return host.toLowerCase().replace(/\.+$/, "");
}

/** The host of a destination (a URL), as DNS reads it; null when it names none. */
export function hostOf(destination: string): string | null {
  if (!URL.canParse(destination)) return null;
  const host = canonicalHost(new URL(destination).hostname);
  return host === "" ? null : host;
}

/** Whether `host` fits a pattern of the host lists: the host itself, or `*.domain` for a subdomain of it. */
export function hostMatches(pattern: string, host: string): boolean {
  const wanted = canonicalHost(pattern);
  const name = canonicalHost(host);
  return wanted.startsWith("*.") ? name.endsWith(wanted.slice(1)) : name === wanted;
}

/**
 * The one policy for requests that leave this machine (web_fetch, web_search, MCP servers over
 * HTTP; the shell's proxy applies its deny list). A denied host never; an allowed one always. Any
 * other host follows the tool's own permission until the task has read data of this machine (`taint`):
 * from then on a host not approved before is asked, whatever the request carries — no encoding of
 * what was read gets round a question about where it goes.
 */
export function egressVerdict(hostsPolicy: PermissionsConfig["hosts"], destinations: readonly string[], taint: string | null, approved: (host: string) => boolean): EgressVerdict {
  const hosts = [...new Set(destinations.map(hostOf).filter((host): host is string => host !== null))];
  const denied = hosts.find((host) => hostsPolicy.deny.some((pattern) => hostMatches(pattern, host)));
  if (denied) return { kind: "deny", host: denied };
  if (taint === null) return { kind: "go" };
  const unapproved = hosts.filter((host) => !hostsPolicy.allow.some((pattern) => hostMatches(pattern, host)) && !approved(host));
  if (unapproved.length === 0) return { kind: "go" };
  return { kind: "ask", hosts: unapproved, reason: `the task has read data of this machine (${taint}), and ${unapproved.join(", ")} ${unapproved.length === 1 ? "is" : "are"} not approved: whatever the task read could go there` };
}

/** Whether the user answered "always" for a host, in any task (an approval `host:NAME`). */
export function hostApproved(approvals: { findActive(command: string, cwd: string): unknown }, host: string): boolean {
  return approvals.findActive(`${HOST_APPROVAL_PREFIX}${host}`, ANY_WORKSPACE) !== null;
}
