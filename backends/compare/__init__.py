"""One prompt on several backends: the runner and the panes' specs."""
