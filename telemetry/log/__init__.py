"""The turn log on disk: writing and reading its lines, the sessions it holds, what a file may keep."""
