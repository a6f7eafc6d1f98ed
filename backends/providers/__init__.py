"""The hosted APIs: each wire format's backend, the errors they raise, and ``-m PROVIDER:MODEL``."""
