"""The chat: its app, its screen, a turn's hand-off, its commands, sessions and compare mode."""
