"""What the screen shows of turns, prepared without drawing: timelines on one scale, and render lag."""
