"""Reports people open: charts in the terminal and as files, and the self-contained HTML page."""
