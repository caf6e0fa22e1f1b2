//! Statewire: the conformance vectors through the header and patch
//! parsers, the HTTP and WebSocket transports against a real server, the
//! exactly-once lanes across client reconnects and server SIGKILLs, and
//! the fixtures.

mod conformance;
