// pino-roll ships no types; this is the part of its API DuckLM uses.
declare module "pino-roll" {
  import type { DestinationStream } from "pino";
  export interface PinoRollOptions {
    file: string;
    extension?: string;
    size?: string | number;
    frequency?: string | number;
    mkdir?: boolean;
    symlink?: boolean;
    limit?: { count?: number; removeOtherLogFiles?: boolean };
  }
  export default function roll(options: PinoRollOptions): Promise<DestinationStream>;
}
