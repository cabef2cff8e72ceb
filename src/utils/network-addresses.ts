import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import { networkInterfaces } from "node:os";
import ipaddr from "ipaddr.js";
import { DuckError, ErrorCode } from "../errors/duck-error.js";

function parsed(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (!ipaddr.isValid(address)) return null;
  const value = ipaddr.parse(address);
  return value.kind() === "ipv6" && (value as ipaddr.IPv6).isIPv4MappedAddress() ? (value as ipaddr.IPv6).toIPv4Address() : value;
}

/**
 * Whether an address is on the public internet. Loopback, private, link-local, carrier-grade NAT,
 * multicast, reserved and unspecified ranges are not, and neither are IPv6 forms that embed them.
 */
export function isPublicAddress(address: string): boolean {
  return parsed(address)?.range() === "unicast";
}

/** Loopback or unspecified: this machine itself, whatever port. */
export function isLoopbackAddress(address: string): boolean {
  const range = parsed(address)?.range();
  return range === "loopback" || range === "unspecified";
}

/** Every address an interface of this machine has (a service bound to 0.0.0.0 answers on each). */
export function ownAddresses(): Set<string> {
  const own = new Set<string>();
  for (const entries of Object.values(networkInterfaces())) for (const entry of entries ?? []) own.add(parsed(entry.address)?.toString() ?? entry.address);
  return own;
}

/** Which addresses a connection may go to: public ones, and private ones only when allowed, never this machine. */
export function addressAllowed(address: string, allowPrivate: boolean, own: ReadonlySet<string> = new Set()): boolean {
  if (isPublicAddress(address)) return !own.has(parsed(address)?.toString() ?? address);
  if (!allowPrivate || isLoopbackAddress(address)) return false;
  return !own.has(parsed(address)?.toString() ?? address);
}

/**
 * A DNS lookup that refuses answers a connection may not go to, so the check and the connection use
 * the same address (no rebinding between them).
 */
export function guardedLookup(allowed: (address: string) => boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, "", 0);
      const usable = addresses.filter((entry) => allowed(entry.address));
      if (usable.length === 0) {
        return callback(new DuckError(ErrorCode.WebAddressBlocked, `${hostname} resolves to ${addresses.map((entry) => entry.address).join(", ")}, which is not a public address`) as unknown as NodeJS.ErrnoException, "", 0);
      }
      if (options.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, usable);
      callback(null, usable[0]!.address, usable[0]!.family);
    });
  };
}
