"""The ``ttft`` command line end to end, each command through its real entry point."""
