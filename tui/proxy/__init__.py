"""``ttft proxy``'s live view: the calls as they end, the app's sessions, the selected one in the pane."""
