export * from "./task.js";
export * from "./tool.js";
export * from "./directive.js";
export * from "./critic.js";
export * from "./memory.js";
export * from "./event-types.js";
export * from "./event.js";
export * from "./checkpoint.js";
