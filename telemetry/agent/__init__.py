"""A tool-using turn's figures: its model and tool steps on the turn's clock, and where the time went."""
