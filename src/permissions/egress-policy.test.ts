import { describe, expect, it } from "vitest";
import { egressVerdict, hostMatches, hostOf } from "./egress-policy.js";

const never = () => false;

describe("the host policy", () => {
  it("reads a host as DNS does: case and the root's trailing dot make no other host", () => {
    expect(hostOf("https://Evil.COM./x")).toBe("evil.com");
    expect(hostMatches("evil.com", "evil.com.")).toBe(true);
    expect(hostMatches("*.evil.com", "a.b.EVIL.com..")).toBe(true);
    expect(hostMatches("*.evil.com", "notevil.com")).toBe(false);
    expect(egressVerdict({ allow: [], deny: ["evil.com"] }, ["https://evil.com./collect"], null, never)).toEqual({ kind: "deny", host: "evil.com" });
  });

  it("lets any host not denied be reached before the task has read anything, and asks for one not approved after", () => {
    const hosts = { allow: ["docs.example.org"], deny: [] };
    expect(egressVerdict(hosts, ["https://collector.example/x"], null, never)).toEqual({ kind: "go" });
    expect(egressVerdict(hosts, ["https://docs.example.org/x"], "the output of step s1 (file_read)", never)).toEqual({ kind: "go" });
    expect(egressVerdict(hosts, ["https://collector.example/x"], "the output of step s1 (file_read)", (host) => host === "collector.example")).toEqual({ kind: "go" });
    const asked = egressVerdict(hosts, ["https://collector.example/x?d=anything"], "the output of step s1 (file_read)", never);
    expect(asked).toMatchObject({ kind: "ask", hosts: ["collector.example"] });
  });
});
