"""ledgerwire-client: Python client for a ledgerwire server.

- `ledgerwire_client.studio`: a Studio conversation over HTTP/SSE.
- `ledgerwire_client.statewire`: Statewire threads (SSE or WebSocket).
- `ledgerwire_client.harness`: a conversation as a `harness-sdk` thread.
- `ledgerwire_client.wire`: the Studio wire's types, generated from `ledgerwire schema`.
"""

__version__ = "0.1.0"
