"""The agent loop's parts: the tools a model may call (``host``), and the loop that runs them."""
