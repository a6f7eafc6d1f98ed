"""The chat: its app, its screen, its prompt, a turn from Enter to its record, commands, sessions, compare mode."""
