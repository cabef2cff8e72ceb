import { describe, expect, it } from "vitest";
import { urlForDisplay } from "./url-for-display.js";

describe("urlForDisplay", () => {
  it("hides passwords and query values named like credentials, and leaves the rest as it is", () => {
    expect(urlForDisplay("http://user:pa55@host:8080/v1?api-version=2024&key=abc")).toBe("http://user:hidden@host:8080/v1?api-version=2024&key=hidden");
    expect(urlForDisplay("https://x.example/mcp?token=Q&access_token=R&X-Amz-Signature=S&page=2")).toBe("https://x.example/mcp?token=hidden&access_token=hidden&X-Amz-Signature=hidden&page=2");
    expect(urlForDisplay("http://127.0.0.1:8080/v1")).toBe("http://127.0.0.1:8080/v1");
    expect(urlForDisplay("not a url")).toBe("not a url");
  });
});
