import type { DuckLM } from "../../runtime/ducklm.js";
import type { StreamOptions } from "../event-stream.js";

/** What every route plugin is given: the DuckLM API (never the database) and the server's settings. */
export interface RouteOptions {
  ducklm: DuckLM;
  token: string;
  stream?: StreamOptions;
}
