"""Modal screens of the chat: help, settings, sessions."""
