"""The settlement write model: the one guarded write of every change after booking."""
