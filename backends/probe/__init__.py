"""``ttft probe``'s runner: the designed experiment and its turns."""
