import type { ModelRole } from "../contracts/index.js";

/** Where a decider reports model output as it is generated; the RuntimeLoop turns it into events. */
export interface ModelStreamSink {
  started(role: ModelRole, purpose: string): void;
  delta(role: ModelRole, purpose: string, text: string): void;
  completed(role: ModelRole, purpose: string, text: string): void;
}

export const silentSink: ModelStreamSink = { started() {}, delta() {}, completed() {} };
