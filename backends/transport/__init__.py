"""HTTP under the backends: the SDKs' instrumented client, the bench's own transports, connection facts."""
