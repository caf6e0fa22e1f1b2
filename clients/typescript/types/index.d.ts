export * from "./studio.js";
export * from "./statewire.js";
export { HarnessClient, HARNESS_PROTOCOL, HARNESS_VERSION, INTEREST_PROTOCOL, MESSAGE_NAMESPACE } from "./harness.js";
