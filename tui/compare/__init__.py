"""The compare screen: panes side by side, their controller, commands, views and files."""
